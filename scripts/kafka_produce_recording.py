#!/usr/bin/env python3
"""Loads a recording (wire format §6, .ndjson or .ndjson.zst) into a topic with confluent-kafka.

An independent client for tests: Maidian's own producer is not involved.
Usage: kafka_produce_recording.py BOOTSTRAP TOPIC FILE [SECONDS]
With SECONDS, the records are spread evenly over about that many seconds (traffic that keeps arriving
while workers run, crash and restart); without it they are sent as fast as possible.
"""
import base64
import json
import sys
import time

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
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    # Retries for as long as a test may keep brokers down; idempotence keeps retried batches single.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                  "message.timeout.ms": 120000})
    failed = []
    n = 0

    def report(err, _msg):
        if err is not None:
            failed.append(str(err))

    records = [line for line in lines(path) if line.strip()]
    start = time.monotonic()
    for line in records:
        if seconds > 0:
            # Pace: record n is due at n/len * seconds.
            due = start + seconds * n / len(records)
            while time.monotonic() < due:
                p.poll(min(0.05, max(0.0, due - time.monotonic())))
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
    remaining = p.flush(180)
    if failed or remaining:
        print(f"delivery failed: {failed[:3]} remaining={remaining}", file=sys.stderr)
        sys.exit(1)
    print(n)


if __name__ == "__main__":
    main()
