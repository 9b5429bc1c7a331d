#!/usr/bin/env python3
"""Reads whole topics with confluent-kafka and writes one JSON line per record:
{"topic", "partition", "offset", "key", "value"} (key and value as UTF-8 text).

An independent reader for tests. Usage: kafka_dump_topics.py BOOTSTRAP OUT TOPIC [TOPIC ...]
"""
import json
import sys

from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING


def main():
    bootstrap, out = sys.argv[1:3]
    topics = sys.argv[3:]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    md = c.list_topics(timeout=30)
    parts = []
    for t in topics:
        for p in md.topics[t].partitions:
            lo, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=30)
            if hi > lo:
                parts.append(TopicPartition(t, p, OFFSET_BEGINNING))
    pending = {(tp.topic, tp.partition) for tp in parts}
    if parts:
        c.assign(parts)
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        while pending:
            for m in c.consume(1000, timeout=5):
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        pending.discard((m.topic(), m.partition()))
                        continue
                    raise SystemExit(f"consume error: {m.error()}")
                f.write(json.dumps({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                                    "key": m.key().decode() if m.key() is not None else None,
                                    "value": m.value().decode()}) + "\n")
                n += 1
    c.close()
    print(n)


if __name__ == "__main__":
    main()
