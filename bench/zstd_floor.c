/* The zstd floor of `maidian bench`: decompress every zstd record value of a recording with one reused
 * context, as maidian does, and nothing else. Prints the CPU time of each of N passes.
 *
 *   python3 bench/dump_values.py "$(scripts/bench-recording.sh)" /tmp/values.bin
 *   cc -O2 bench/zstd_floor.c -lzstd -o /tmp/zstd_floor && /tmp/zstd_floor /tmp/values.bin 5
 */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s VALUES.bin [PASSES]\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n);
    if (fread(buf, 1, n, f) != (size_t)n) { perror("read"); return 1; }
    fclose(f);
    int passes = argc > 2 ? atoi(argv[2]) : 3;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    size_t cap = 16 << 20;
    unsigned char *out = malloc(cap);
    for (int pass = 0; pass < passes; pass++) {
        double t0 = cpu_seconds();
        long records = 0, frames = 0;
        size_t bytes = 0;
        for (long p = 0; p < n;) {
            uint32_t len;
            memcpy(&len, buf + p, 4);
            unsigned char *v = buf + p + 4;
            p += 4 + len;
            records++;
            if (len < 4 || memcmp(v, "\x28\xb5\x2f\xfd", 4) != 0) continue;
            unsigned long long size = ZSTD_findDecompressedSize(v, len);
            if (size >= ZSTD_CONTENTSIZE_ERROR || size > cap) continue;
            size_t r = ZSTD_decompressDCtx(dctx, out, size, v, len);
            if (!ZSTD_isError(r)) { bytes += r; frames++; }
        }
        printf("records %ld, zstd values %ld, %zu bytes: %.3f s CPU\n", records, frames, bytes, cpu_seconds() - t0);
    }
    return 0;
}
