#!/usr/bin/env python3
"""Writes the two recordings of docs/hostile-input.md's memory measurement (issue 13): records each compressed
to at most 300 kB and decompressing to just under the 16 MiB limit.

  worst.ndjson   400 records: 16 MiB of whitespace (with and without a zstd content size), 10,000 events of 88
                 properties each, one event of 1.5 million properties
  worst2.ndjson  200 records alternating 16 MiB of whitespace and 10,000 distinct events

Usage: scripts/hostile-recording.py OUTDIR, then
  /usr/bin/time -v maidian bench pipelines/app-analytics.yaml --recording OUTDIR/worst.ndjson
"""
import base64, json, os, sys
import zstandard

LIM = 16 * 1024 * 1024 - 64
PROPS = ",".join('"p%02d":"%s"' % (i, "v" * 8) for i in range(88))

def line(f, key, value):
    f.write(json.dumps({"key": key, "headers": {"received_at": "1763700000000", "project": "p"},
                        "timestamp": 1763700000000, "value_b64": base64.b64encode(value).decode()}) + "\n")

def whitespace():
    return b"[" + b" " * (LIM - 2) + b"]"

def events(distinct, track):
    ev = '{"type":"track","event":"$AppViewScreen","time":%d,"distinct_id":"%s","_track_id":%d,"properties":{"$screen_name":"Home",' + PROPS + '}}'
    s = ("[" + ",".join(ev % (1763700000000 + i, distinct, track + i) for i in range(10000)) + "]").encode()
    assert len(s) <= LIM, len(s)
    return s

def many_properties():
    body, size, i = [], 200, 0
    while size < LIM - 40:
        t = '"a%07d":1' % i
        body.append(t)
        size += len(t) + 1
        i += 1
    return ('[{"type":"track","event":"$AppClick","time":1763700000000,"distinct_id":"u1","properties":{' + ",".join(body) + '}}]').encode()

def main(out):
    best = zstandard.ZstdCompressor(level=19)
    kinds = [best.compress(whitespace()),
             zstandard.ZstdCompressor(level=19, write_content_size=False).compress(whitespace()),
             best.compress(events("u1", 0)),
             best.compress(many_properties())]
    with open(os.path.join(out, "worst.ndjson"), "w") as f:
        for i in range(400):
            line(f, "k%d" % i, kinds[i % len(kinds)])
    fast = zstandard.ZstdCompressor(level=3)
    with open(os.path.join(out, "worst2.ndjson"), "w") as f:
        for r in range(200):
            line(f, "k%d" % r, fast.compress(events("u%d" % r, 0)) if r % 2 == 0 else kinds[0])

if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
