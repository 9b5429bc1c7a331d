#!/usr/bin/env python3
"""Loads a recording (SPEC section 6, .ndjson or .ndjson.zst) into a topic with confluent-kafka.

An independent client for tests: Maidian's own producer is not involved.
Usage: kafka_produce_recording.py BOOTSTRAP TOPIC FILE
"""
import base64
import json
import sys

from confluent_kafka import Producer


def lines(path):
    if path.endswith(".zst"):
        import zstandard
        with open(path, "rb") as f:
            data = zstandard.ZstdDecompressor().stream_reader(f).read()
        return data.decode().splitlines()
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def main():
    bootstrap, topic, path = sys.argv[1:4]
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failed = []
    n = 0

    def report(err, _msg):
        if err is not None:
            failed.append(str(err))

    for line in lines(path):
        if not line.strip():
            continue
        r = json.loads(line)
        headers = [(k, v.encode()) for k, v in r.get("headers", {}).items()]
        while True:
            try:
                p.produce(topic, key=r.get("key"), value=base64.b64decode(r["value_b64"]), headers=headers,
                          timestamp=r.get("timestamp") or 0, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
        n += 1
    remaining = p.flush(60)
    if failed or remaining:
        print(f"delivery failed: {failed[:3]} remaining={remaining}", file=sys.stderr)
        sys.exit(1)
    print(n)


if __name__ == "__main__":
    main()
