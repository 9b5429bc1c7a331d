#!/usr/bin/env python3
"""What keeping written windows for late events costs at a takeover (docs/recovery.md §3a).

For each `allowed_lateness` given: an embedded broker (`maidian broker`), the recording loaded into the raw
topic, worker A (`maidian run`) reads all of it and is stopped with SIGTERM (a clean commit, with replay
points); worker B (`maidian run --until-end`, same group) then takes every partition over from those commits.
Reported per internal (`<group>.partials`) partition and for the raw topic: records and bytes re-read, and
the seconds from B's assignment to its state being rebuilt (the worker's own "state rebuilt ... in X s"
lines); and for the merger, the windows it keeps (distinct window starts among the re-read partials' keys)
and the bytes re-read per kept window.

    swift build -c release --product maidian
    bench/late_takeover.py /work/shared/traffic/bench-3k.ndjson.zst --lateness 1h 24h
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE = os.path.join(ROOT, "pipelines", "app-analytics.yaml")


def release_bin():
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), "maidian")


def end_offsets(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "late-takeover-reader"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
    finally:
        c.close()


def committed(bootstrap, group, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return sum(max(tp.offset, 0) for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30))
    finally:
        c.close()


def partials_between(bootstrap, topic, q, start, end):
    """Bytes (key + value) and distinct window starts of the partials in [start, end) of partition q."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "late-takeover-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, q, start)])
    size, windows, n = 0, set(), 0
    try:
        while n < end - start:
            m = c.poll(5)
            if m is None:
                break
            if m.error() or m.offset() >= end:
                if m.offset() >= end:
                    break
                continue
            n += 1
            key = m.key() or b""
            size += len(key) + len(m.value() or b"")
            parts = key.split(b"|")
            if len(parts) == 4:
                windows.add(int(parts[2]))
    finally:
        c.close()
    return n, size, windows


def run(binary, recording, lateness, partitions, tmp):
    group = f"late-{lateness}-{os.getpid()}"
    small = max(4, partitions // 4)
    topics = (f"events.raw:{partitions},events.enriched:{partitions},events.dlq:{small},metrics.counts:{small},"
              f"metrics.dwell:{small},crash.trails:{small},{group}.partials:{small}")
    pipeline = os.path.join(tmp, f"{group}.yaml")
    text = open(PIPELINE).read()
    assert "allowed_lateness: 24h" in text
    open(pipeline, "w").write(text.replace("allowed_lateness: 24h", f"allowed_lateness: {lateness}"))
    addr = os.path.join(tmp, f"{group}.addr")
    broker = subprocess.Popen([binary, "broker", "--topics", topics, "--log-level", "warning"], stdout=open(addr, "w"),
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            if os.path.getsize(addr) > 0:
                break
            time.sleep(0.05)
        bootstrap = open(addr).readline().strip()
        env = dict(os.environ, MAIDIAN_BROKERS=bootstrap, MAIDIAN_GROUP=group, MAIDIAN_SESSION_TIMEOUT="6s",
                   MAIDIAN_LOG_LEVEL="info", MAIDIAN_GEO_DB=os.path.join(ROOT, "testdata", "geo", "test-city.mmdb"),
                   MAIDIAN_RULES=os.path.join(ROOT, "testdata", "traffic", "rules-sample.yaml"))
        subprocess.run([binary, "produce", recording, "--brokers", bootstrap, "--topic", "events.raw", "--log-level", "warning"],
                       cwd=ROOT, env=env, check=True)
        total = end_offsets(bootstrap, "events.raw", partitions)
        a_log = os.path.join(tmp, f"{group}-a.err")
        a = subprocess.Popen([binary, "run", pipeline], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(a_log, "w"))
        t0 = time.monotonic()
        while committed(bootstrap, group, "events.raw", partitions) < total:
            if a.poll() is not None:
                sys.exit(f"worker A exited {a.returncode}; see {a_log}")
            time.sleep(1)
        first = time.monotonic() - t0
        time.sleep(5)  # the merger's last batches and commits
        a.send_signal(signal.SIGTERM)
        a.wait(120)
        b_log = os.path.join(tmp, f"{group}-b.err")
        b = subprocess.Popen([binary, "run", pipeline, "--until-end"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=open(b_log, "w"))
        b.wait(1800)
        rereads, rebuilt = {}, {}
        for line in open(b_log):
            m = re.search(r"\] (\S+)\[(\d+)\]: re-reading from offset (\d+) to rebuild state up to the committed offset (\d+)", line)
            if m:
                rereads[(m.group(1), int(m.group(2)))] = (int(m.group(3)), int(m.group(4)))
            m = re.search(r"\] (\S+)\[(\d+)\]: state rebuilt up to offset \d+ \((\d+) records re-read in ([\d.]+) (ms|s)\)", line)
            if m:
                secs = float(m.group(4)) / (1000 if m.group(5) == "ms" else 1)
                rebuilt[(m.group(1), int(m.group(2)))] = (int(m.group(3)), secs)
        raw = [v for k, v in rebuilt.items() if k[0] == "events.raw"]
        internal = sorted((k, v) for k, v in rereads.items() if k[0].endswith(".partials"))
        print(f"allowed_lateness {lateness}: {total} records; worker A read them in {first:.0f} s")
        print(f"  raw topic: {sum(n for n, _ in raw)} records re-read over {len(raw)} partitions, the slowest rebuilt in "
              f"{max((s for _, s in raw), default=0):.2f} s")
        all_windows, all_bytes, all_n, slowest = set(), 0, 0, 0.0
        for (topic, q), (start, end) in internal:
            n, size, windows = partials_between(bootstrap, topic, q, start, end)
            secs = rebuilt.get((topic, q), (0, 0.0))[1]
            slowest = max(slowest, secs)
            all_windows |= windows
            all_bytes += size
            all_n += n
            print(f"  {topic}[{q}]: re-read {n} partials, {size / 1e6:.1f} MB, {len(windows)} windows, rebuilt in {secs:.2f} s")
        per_window = all_bytes / max(len(all_windows), 1)
        print(f"  merger: {all_n} partials, {all_bytes / 1e6:.1f} MB re-read for {len(all_windows)} windows kept: "
              f"{per_window / 1e3:.0f} kB per window; slowest internal partition rebuilt in {slowest:.2f} s; "
              f"worker B exited {b.returncode}")
    finally:
        broker.terminate()
        broker.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("--lateness", nargs="+", default=["1h", "24h"])
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--bin", default=None)
    a = ap.parse_args()
    binary = a.bin or release_bin()
    tmp = tempfile.mkdtemp(prefix="late-takeover-")
    print(f"binary {binary}; logs in {tmp}")
    for lateness in a.lateness:
        run(binary, os.path.abspath(a.recording), lateness, a.partitions, tmp)


if __name__ == "__main__":
    main()
