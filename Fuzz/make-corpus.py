#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (Fuzz/corpus/<target>/): a few ordinary inputs and one input per
class of hostile input of issue 13. Run from the repository root; the files are checked in, this script says
how they were made."""
import base64, json, os, struct, sys
import zstandard

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = os.path.join(root, "Fuzz", "corpus")

def record(value, ip=None, ua=None, project=None, received_at=None):
    """FuzzRecord's input layout: four header lengths (255 = absent), the header bytes, the value."""
    hs = [ip, ua, project, received_at]
    head = bytes(255 if h is None else len(h) for h in hs)
    return head + b"".join(h for h in hs if h is not None) + value

def zst(data, content_size=True):
    return zstandard.ZstdCompressor(level=19, write_content_size=content_size).compress(data)

def write(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def event(**kw):
    e = {"type": "track", "event": "$AppClick", "time": 1763700000000, "distinct_id": "u1", "_track_id": 7,
         "properties": {"$element_content": "Buy", "$screen_name": "Home"}}
    e.update(kw)
    return e

def js(v):
    return json.dumps(v, separators=(",", ":")).encode()

R = "record"
# Ordinary records from the sample recording.
with open(os.path.join(root, "testdata", "traffic", "sample.ndjson")) as f:
    for i, line in enumerate(f):
        if i >= 6: break
        r = json.loads(line)
        h = r.get("headers", {})
        enc = lambda k: h[k].encode() if k in h else None
        write(R, "sample-%d" % i, record(base64.b64decode(r["value_b64"]), enc("ip"), enc("ua"), enc("project"), enc("received_at")))
write(R, "raw-json", record(js([event()]), b"1.0.1.3", b"Mozilla/5.0 (iPhone)", b"shop", b"1763700001000"))
# Class 1: times near the 64-bit limits, with and without _track_id, with a flush time.
write(R, "c1-time-min", record(b'[{"type":"track","event":"a","time":-9223372036854775807,"distinct_id":"u","_track_id":1}]'))
write(R, "c1-time-max", record(b'[{"type":"track","event":"$AppViewScreen","time":9223372036854775807,"distinct_id":"u","properties":{"$screen_name":"Home"}}]'))
write(R, "c1-flush", record(b'[{"type":"track","event":"a","time":1763700000000,"_flush_time":-9223372036854775807,"distinct_id":"u"}]', received_at=b"999999999999999999"))
# Class 2: a record decompressing to just under 16 MiB (the whole batch bound then matters).
big = b"[" + b" " * (16 * 1024 * 1024 - 64) + b"]"
write(R, "c2-16mib-whitespace", record(zst(big)))
many = b"[" + b",".join([b'{"type":"track","event":"e","time":1763700000000,"distinct_id":"u"}'] * 10000) + b"]"
write(R, "c2-10k-events", record(zst(many)))
# Class 3: outputs too large for the producer.
write(R, "c3-big-distinct-id", record(zst(js([event(distinct_id="x" * 1_000_000)]))))
write(R, "c3-big-bad-name", record(zst(js([event(properties={("-" * 1_000_000): 1})]))))
write(R, "c3-big-bad-json", record(zst(b"[" + b"{" * 800_000)))
write(R, "c3-6mb-event", record(zst(js([event(properties={"p%d" % i: "v" * 8000 for i in range(750)})]))))
# Class 4: many tiny frames without a content size.
tiny = lambda b: b"\x28\xb5\x2f\xfd\x00\x00\x09\x00\x00" + bytes([b])
write(R, "c4-tiny-frames", record(tiny(0x5B) + tiny(0x20) * 50_000 + tiny(0x5D)))
write(R, "c4-no-content-size", record(zst(js([event()]), content_size=False)))
# Class 7: clients writing the server's fields, duplicate keys, header bytes, numbers.
write(R, "c7-server-owned", record(js([event(properties={"$matched_rules": ["spoofed"], "$late": False, "$dropped_properties": "x", "$client_time": 1, "$receive_time": 2})])))
write(R, "c7-duplicate-type", record(b'[{"type":"profile_set","type":"track","event":"a","time":1763700000000,"distinct_id":"u"}]'))
write(R, "c7-duplicate-property", record(b'[{"type":"track","event":"a","time":1763700000000,"distinct_id":"u","properties":{"a":1,"\\u0061":2}}]'))
write(R, "c7-header-bytes", record(js([event()]), b"1.0.1.3\xff", b"\xc3\x28", b"sh\xffop", b"12x"))
write(R, "c7-big-numbers", record(b'[{"type":"track","event":"a","time":1763700000000,"distinct_id":"u","properties":{"n":1e400,"m":123456789012345678901234567890}}]'))

# Loaders: the sample files, and depth and alias bombs (class 5) and an empty file (class 6).
with open(os.path.join(root, "pipelines", "app-analytics.yaml"), "rb") as f:
    write("pipeline", "app-analytics", f.read())
with open(os.path.join(root, "testdata", "traffic", "rules-sample.yaml"), "rb") as f:
    write("rules", "rules-sample", f.read())
depth = b"stages: " + b"[" * 5000 + b"]" * 5000 + b"\n"
laughs = b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + b"".join(
    b"%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n" % ((chr(98 + i).encode(), chr(98 + i).encode()) + (chr(97 + i).encode(),) * 9)
    for i in range(9))
merge = b"a: &a {x: 1, y: 2}\n" + b"".join(b"m%d: &m%d {<<: [*%s, *%s, *%s, *%s]}\n" % (i, i, *([b"a" if i == 0 else b"m%d" % (i - 1)] * 4)) for i in range(30))
for target in ("pipeline", "rules"):
    write(target, "c5-flow-depth", depth)
    write(target, "c5-billion-laughs", laughs)
    write(target, "c5-merge-keys", merge)
    write(target, "c5-block-depth", b"- " * 5000 + b"x\n")
write("pipeline", "c6-empty", b"")
write("rules", "empty", b"")

# FuzzInternal: internal-topic records (wire layout in Sources/MaidianStages/Windows/Partials.swift) as the
# target reads them: a flags byte, an item byte, then records with 2-byte lengths.
def partial(source, window_end, count, users, rule="home", late=None):
    head = b'{"metric":"pv","rule":"%s","window_start":%d,"window_end":%d,"dims":{}' % (rule.encode(), window_end - 60000, window_end)
    m = b"\x01" + (b"\x03" + struct.pack("<q", late) if late is not None else b"\x01")
    m += struct.pack("<iqi", source, window_end, len(head)) + head + struct.pack("<q", count)
    m += b"\x00" + struct.pack("<i", len(users)) + b"".join(struct.pack("<Q", u) for u in users) + b"\x00"
    return (b"pv|%s|%d|" % (rule.encode(), window_end - 60000), m)

def progress(source, watermark, idle=False):
    return (None, b"\x01\x02" + struct.pack("<iqB", source, watermark, 1 if idle else 0))

def bundle(messages):
    b = b"\x01\x06" + struct.pack("<i", len(messages))
    for key, value in messages:
        b += (struct.pack("<i", -1) if key is None else struct.pack("<i", len(key)) + key) + struct.pack("<i", len(value)) + value
    return b

def internal(records, restore=False, item=0):
    return bytes([1 if restore else 0, item]) + b"".join(struct.pack("<H", len(r)) + r for r in records)

W = 1763700060000
recs = [bundle([partial(0, W, 2, [1, 2]), partial(0, W, 1, [3], rule="cart"), progress(0, W + 5000)]),
        bundle([partial(1, W, 3, [4, 5, 6]), progress(1, W + 5000)]),
        bundle([partial(1, W, 1, [7], late=99), partial(1, W + 60000, 1, [8]), progress(1, W + 65000)]),
        progress(0, 2**63 - 1)[1], progress(1, 2**63 - 1)[1]]
write("internal", "bundles", internal(recs))
write("internal", "restored-inside-a-bundle", internal(recs, restore=True, item=2))
write("internal", "single-messages", internal([partial(0, W, 2, [1])[1], progress(0, W + 5000)[1], progress(1, W + 5000, idle=True)[1]]))
write("internal", "truncated-bundle", internal([bundle([partial(0, W, 2, [1]), progress(0, W)])[:-3]]))
print("corpus written to", out)
