"""Writes the record values of a recording (wire format §6) as <4-byte little-endian length><bytes>, for
bench/zstd_floor.c.

    python3 bench/dump_values.py "$(scripts/bench-recording.sh)" /tmp/values.bin
"""
import base64
import io
import json
import struct
import sys

import zstandard


def lines(path):
    raw = open(path, "rb")
    if path.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().stream_reader(raw)
    return io.TextIOWrapper(raw, encoding="utf-8")


with open(sys.argv[2], "wb") as out:
    for line in lines(sys.argv[1]):
        value = base64.b64decode(json.loads(line)["value_b64"])
        out.write(struct.pack("<I", len(value)))
        out.write(value)
