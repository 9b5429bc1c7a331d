// The issue-2 reference point, rebuilt: decompress every record value of a recording with one reused zstd
// context and walk every field of every event with simdjson (DOM, one reused parser). No validation, no
// output. Prints the CPU time of each pass and events per CPU second, so that `maidian bench` can be
// compared with it at the same moment on a machine whose speed drifts.
//
//   apt-get install libsimdjson-dev libzstd-dev
//   python3 bench/dump_values.py "$(scripts/bench-recording.sh)" /tmp/values.bin
//   g++ -O3 -march=native -std=c++17 bench/simdjson_walk.cpp -lsimdjson -lzstd -o /tmp/simdjson_walk
//   /tmp/simdjson_walk /tmp/values.bin 5
#include <simdjson.h>
#include <zstd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

static double cpu_seconds() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// Touches every value so that nothing can be skipped: string lengths, numbers, booleans, nested objects.
static uint64_t walk(simdjson::dom::element e) {
    using namespace simdjson;
    switch (e.type()) {
    case dom::element_type::OBJECT: {
        uint64_t s = 0;
        for (auto field : dom::object(e)) s += field.key.size() + walk(field.value);
        return s;
    }
    case dom::element_type::ARRAY: {
        uint64_t s = 0;
        for (auto v : dom::array(e)) s += walk(v);
        return s;
    }
    case dom::element_type::STRING: return std::string_view(e).size();
    case dom::element_type::INT64: return uint64_t(int64_t(e));
    case dom::element_type::UINT64: return uint64_t(e);
    case dom::element_type::DOUBLE: return uint64_t(double(e));
    case dom::element_type::BOOL: return bool(e) ? 1 : 0;
    default: return 0;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) { std::fprintf(stderr, "usage: %s VALUES.bin [PASSES]\n", argv[0]); return 2; }
    FILE *f = std::fopen(argv[1], "rb");
    if (!f) { std::perror(argv[1]); return 1; }
    std::fseek(f, 0, SEEK_END);
    long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<unsigned char> buf(n);
    if (std::fread(buf.data(), 1, n, f) != size_t(n)) { std::perror("read"); return 1; }
    std::fclose(f);
    int passes = argc > 2 ? std::atoi(argv[2]) : 3;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    const size_t cap = 16 << 20;
    std::vector<char> out(cap + simdjson::SIMDJSON_PADDING);
    simdjson::dom::parser parser;
    for (int pass = 0; pass < passes; pass++) {
        double t0 = cpu_seconds();
        long records = 0, events = 0;
        size_t bytes = 0;
        uint64_t sink = 0;
        for (long p = 0; p < n;) {
            uint32_t len;
            std::memcpy(&len, buf.data() + p, 4);
            const unsigned char *v = buf.data() + p + 4;
            p += 4 + len;
            records++;
            size_t size;
            if (len >= 4 && std::memcmp(v, "\x28\xb5\x2f\xfd", 4) == 0) {
                unsigned long long declared = ZSTD_getFrameContentSize(v, len);
                if (declared >= ZSTD_CONTENTSIZE_ERROR || declared > cap) continue;
                size = ZSTD_decompressDCtx(dctx, out.data(), declared, v, len);
                if (ZSTD_isError(size)) continue;
            } else {
                if (len > cap) continue;
                std::memcpy(out.data(), v, len);
                size = len;
            }
            bytes += size;
            simdjson::dom::element doc;
            if (parser.parse(out.data(), size, false).get(doc)) continue;
            simdjson::dom::array arr;
            if (doc.get_array().get(arr)) continue;
            for (auto ev : arr) { events++; sink += walk(ev); }
        }
        double s = cpu_seconds() - t0;
        std::printf("records %ld, events %ld, %zu bytes of JSON: %.3f s CPU, %.0f events per CPU second (sink %llu)\n",
                    records, events, bytes, s, events / s, (unsigned long long)sink);
    }
    ZSTD_freeDCtx(dctx);
    return 0;
}
