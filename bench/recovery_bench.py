#!/usr/bin/env python3
"""Measures recovery on the embedded mock cluster (docs/recovery.md, "Measured").

  takeover   two workers over the sample traffic arriving for 80 s; one is killed with SIGKILL: per source
             partition it held, the time until the group's committed offset moves past where it was (another
             worker took it over, re-read its state horizon and committed new progress); then the survivor
             gets SIGTERM: the time until it exited.
  replay     one worker runs a generated recording to its end (--until-end); a second worker of the same group
             then takes every partition over from the commits: it re-reads each partition's state horizon with
             outputs suppressed. Both timed, for the default horizons and for shorter ones.
  profile    the first run of `replay` under `perf record`: the share of the worker's CPU time in the recovery
             bookkeeping (offset tracking, replay points, contiguity checks, commits).

Usage: bench/recovery_bench.py [takeover|replay|profile|all] [--runs N] [--session 6s] [--bin PATH]
Needs a release build (swift build -c release), testdata/ (geo, rules, sample), confluent-kafka, and perf
for `profile`.
"""
import argparse
import datetime
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/ is one level down
SHARED = os.path.join(ROOT, "testdata")
PIPELINE = os.path.join(ROOT, "pipelines", "app-analytics.yaml")
TMP = tempfile.mkdtemp(prefix="recovery-bench-")


def release_bin():
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True)
    return os.path.join(out.stdout.strip(), "maidian")


class Broker:
    def __init__(self, binary, groups, raw_partitions=8):
        topics = [f"events.raw:{raw_partitions}", "events.enriched:8", "events.dlq:4", "metrics.counts:4",
                  "metrics.dwell:4", "crash.trails:4"] + [f"{g}.partials:4" for g in groups]
        self.proc = subprocess.Popen([binary, "broker", "--topics", ",".join(topics), "--log-level", "warning"],
                                     stdout=subprocess.PIPE, text=True)
        self.bootstrap = self.proc.stdout.readline().strip()
        self.raw_partitions = raw_partitions

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)

    def committed(self, group, partitions=None):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
        try:
            parts = partitions if partitions is not None else range(self.raw_partitions)
            res = c.committed([TopicPartition("events.raw", p) for p in parts], timeout=30)
            return {tp.partition: max(tp.offset, 0) for tp in res}
        finally:
            c.close()


def env(broker, group, session, extra=None):
    e = dict(os.environ)
    e.update({"MAIDIAN_BROKERS": broker.bootstrap, "MAIDIAN_GROUP": group, "MAIDIAN_SESSION_TIMEOUT": session,
              "MAIDIAN_LOG_LEVEL": "info", "MAIDIAN_GEO_DB": os.path.join(SHARED, "geo", "test-city.mmdb"),
              "MAIDIAN_RULES": os.path.join(SHARED, "traffic", "rules-sample.yaml")})
    e.update(extra or {})
    return e


def worker(binary, broker, group, session, name, pipeline=PIPELINE, until_end=False, wrap=None):
    log = open(os.path.join(TMP, f"{group}-{name}.err"), "w")
    cmd = (wrap or []) + [binary, "run", pipeline] + (["--until-end"] if until_end else [])
    p = subprocess.Popen(cmd, env=env(broker, group, session), stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT)
    p.log = log.name
    return p


def produce(broker, path, seconds=0):
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "kafka_produce_recording.py"),
                             broker.bootstrap, "events.raw", path, str(seconds)], stdout=subprocess.DEVNULL)


def held_partitions(log_path):
    held = None
    with open(log_path) as f:
        for line in f:
            m = re.search(r"MaidianRuntime\] assigned partitions \[(.*)\]", line)
            if m:
                held = [int(x) for x in re.findall(r'"events\.raw/(\d+)"', m.group(1))]
    return held or []


def phases(log_path, wall0, parts):
    """When (s after the kill, 1 s resolution of the log) the survivor got the partitions and had rebuilt them."""
    assigned = rebuilt = None
    reread = 0
    with open(log_path) as f:
        for line in f:
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4})", line)
            if not m:
                continue
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S%z").timestamp() - wall0
            if t < -1:
                continue
            if assigned is None and "MaidianRuntime] assigned partitions" in line and any(f'"events.raw/{p}"' in line for p in parts):
                assigned = t
            r = re.search(r"events\.raw\[(\d+)\]: re-reading from offset (\d+) to rebuild state up to the committed offset (\d+)", line)
            if r and int(r.group(1)) in parts:
                reread += int(r.group(3)) - int(r.group(2))
            if "state rebuilt" in line and any(f"events.raw[{p}]" in line for p in parts):
                rebuilt = t
    fmt = lambda x: "?" if x is None else f"{x:.0f}"
    return f"assigned after ~{fmt(assigned)} s, {reread} records re-read, rebuilt after ~{fmt(rebuilt)} s"


def takeover(binary, runs, session):
    results, stops = [], []
    for run in range(runs):
        group = f"takeover-{run}"
        broker = Broker(binary, [group])
        prod = produce(broker, os.path.join(SHARED, "traffic", "sample.ndjson"), 80)
        w = [worker(binary, broker, group, session, f"w{i}") for i in range(2)]
        while sum(broker.committed(group).values()) < 2500:
            time.sleep(0.5)
        time.sleep(3)
        victim = w[0]
        parts = held_partitions(victim.log)
        before = broker.committed(group, parts)
        t0 = time.monotonic()
        wall0 = time.time()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        moved = {}
        while len(moved) < len(parts) and time.monotonic() - t0 < 120:
            now = broker.committed(group, parts)
            for p in parts:
                if p not in moved and now[p] > before[p]:
                    moved[p] = time.monotonic() - t0
            time.sleep(0.1)
        results.append(sorted(moved.values()))
        print(f"run {run}: killed a worker holding raw partitions {parts}; progress elsewhere after "
              + ", ".join(f"{s:.1f}" for s in sorted(moved.values())) + " s; survivor: " + phases(w[1].log, wall0, parts))
        t1 = time.monotonic()
        w[1].send_signal(signal.SIGTERM)
        status = w[1].wait(60)
        stops.append(time.monotonic() - t1)
        print(f"run {run}: survivor exited {status} {stops[-1]:.2f} s after SIGTERM")
        prod.kill()
        broker.stop()
    firsts = [r[0] for r in results if r]
    lasts = [r[-1] for r in results if r]
    print(f"takeover (session {session}, {runs} runs): first partition {statistics.median(firsts):.1f} s "
          f"(min {min(firsts):.1f}), last partition {statistics.median(lasts):.1f} s (max {max(lasts):.1f}) after SIGKILL")
    print(f"SIGTERM to exit: median {statistics.median(stops):.2f} s, max {max(stops):.2f} s")


def replay(binary, session, profile=False):
    rec = os.path.join(TMP, "gen-600x180.ndjson.zst")
    subprocess.run([binary, "gen", "--users", "600", "--minutes", "180", "--seed", "11", "--out", rec], check=True,
                   stdout=subprocess.DEVNULL)
    short = os.path.join(TMP, "short-horizon.yaml")
    with open(PIPELINE) as f:
        text = f.read()
    text = text.replace("visit_timeout: 30m", "visit_timeout: 10m").replace("trail_max_age: 1h", "trail_max_age: 10m")
    with open(short, "w") as f:
        f.write(text)
    for label, pipeline in [("default horizons (60.5 min of event time)", PIPELINE), ("short horizons (20 min: dedup 2 x 10 min)", short)]:
        group = "replay-short" if pipeline == short else "replay-default"
        broker = Broker(binary, [group], raw_partitions=16)  # 32 MB of records: under the mock's 5 MiB per partition
        n = produce(broker, rec)
        n.wait()
        total = sum(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"}).get_watermark_offsets(
            TopicPartition("events.raw", p), timeout=30)[1] for p in range(broker.raw_partitions))
        wrap = None
        if profile and pipeline == PIPELINE:
            wrap = ["perf", "record", "-F", "499", "-g", "-o", os.path.join(TMP, "worker.perf"), "--"]
        t = time.monotonic()
        first = worker(binary, broker, group, session, "first", pipeline, until_end=True, wrap=wrap)
        first.wait()
        full = time.monotonic() - t
        t = time.monotonic()
        second = worker(binary, broker, group, session, "second", pipeline, until_end=True)
        second.wait()
        again = time.monotonic() - t
        reread, longest = 0, 0.0
        with open(second.log) as f:
            for line in f:
                m = re.search(r"events\.raw\[\d+\]: state rebuilt up to offset \d+ \((\d+) records re-read in ([\d.]+) seconds\)", line)
                if m:
                    reread += int(m.group(1))
                    longest = max(longest, float(m.group(2)))
        print(f"{label}: {total} records; first run {full:.1f} s; a new worker taking all {broker.raw_partitions} partitions over "
              f"re-read {reread} records ({100 * reread / total:.0f}%), all rebuilt {longest:.2f} s after the assignment "
              f"(whole run {again:.1f} s, both runs including ~3 s of group join)")
        broker.stop()
        if wrap:
            report_profile(os.path.join(TMP, "worker.perf"))


def report_profile(path):
    out = subprocess.run(["perf", "report", "-i", path, "--stdio", "--no-children", "--sort", "sym", "-g", "none"],
                         capture_output=True, text=True).stdout
    names = ["OffsetTracker", "PartitionClock", "keepReadingContiguous", "rememberMergerPoints", "replayPoint",
             "commitDelivered", "storeOffsets", "checkFrozen"]
    shares = {n: 0.0 for n in names}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(\S+)", line)
        if not m:
            continue
        for n in names:
            if n in m.group(2):
                shares[n] += float(m.group(1))
    print("CPU share of the worker process in recovery bookkeeping (perf, self time): "
          + ", ".join(f"{n} {v:.2f}%" for n, v in shares.items() if v > 0) + f"; total {sum(shares.values()):.2f}%")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", nargs="?", default="all", choices=["takeover", "replay", "profile", "all"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--session", default="6s")
    ap.add_argument("--bin", default=None)
    a = ap.parse_args()
    binary = a.bin or release_bin()
    print(f"binary {binary}; logs in {TMP}")
    if a.what in ("takeover", "all"):
        takeover(binary, a.runs, a.session)
    if a.what in ("replay", "profile", "all"):
        replay(binary, a.session, profile=a.what in ("profile", "all"))


if __name__ == "__main__":
    main()
