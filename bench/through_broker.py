#!/usr/bin/env python3
"""A worker's throughput as a user meets it: through a Kafka-protocol broker.

Starts an embedded broker (`maidian broker`, librdkafka's mock cluster in its own process), loads a
recording into the raw topic, then starts N `maidian run --until-end` workers of one consumer group
and times them from the first partition assignment to the moment every worker is done: its source
partitions read to the end offsets, the windows merged through the internal topic, everything delivered
and committed ("bounded run done"). It reports events per second over that span, the CPU seconds of the
workers and of the broker separately (a worker that waits shows as CPU seconds well below the span), and
each worker's loop profile: seconds and calls per phase (poll, stages, produce, deliveries, commits, flush)
and the polls after assignment that returned nothing, i.e. what it waited on.

    swift build -c release
    bench/through_broker.py RECORDING [--workers N] [--partitions 32] [--internal-partitions N] [--pipeline pipelines/app-analytics.yaml]

The event count is taken from `maidian bench --json` over the same recording (the same definition of
"events" as `maidian bench`), so the figure compares directly with the offline one. The embedded broker keeps
at most 5 MiB per partition and silently drops the oldest records beyond that (KAFKA-NOTES.md): with too few
partitions for the recording a worker reads only part of it and looks fast. So after the run every topic's
log start offsets are read back; a raw topic that lost records fails the run (exit 1, nothing printed as a
figure), and an output topic that did shows in `dropped_records` (and fails the run with --duplicates, whose
count would be wrong).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def release_bin():
    out = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip(), "maidian")


def proc_cpu_seconds(pid):
    """utime + stime of a live process (and its reaped children), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # fields[11..14] are utime, stime, cutime, cstime (fields 14..17 of stat(5), after pid and comm)
    return sum(int(x) for x in fields[11:15]) / ticks


class Worker:
    """One `maidian run --until-end` process whose log lines are timestamped as they arrive."""

    def __init__(self, binary, pipeline, env, index, log_level="info"):
        self.index = index
        self.assigned_at = None
        self.done_at = None
        # The last "reached the end offsets" line: from it to done is the run's tail (final write-out, the
        # last partials through the internal topic, the final flush and commit).
        self.reached_end_at = None
        self.lines = []
        # When each line arrived (time.monotonic()), for --logs.
        self.line_times = []
        self.profile = None
        self.saw_done_line = False
        self.proc = subprocess.Popen(
            [binary, "run", pipeline, "--until-end", "--log-level", log_level],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            now = time.monotonic()
            self.lines.append(line.rstrip("\n"))
            self.line_times.append(now)
            if self.assigned_at is None and "assigned partitions" in line and "[]" not in line:
                self.assigned_at = now
            # Done: merged, delivered and committed; binaries before that line logged "reached the end
            # offsets" until their merge was complete, so the last such line is their end.
            if "reached the end offsets" in line:
                self.reached_end_at = now
            if "bounded run done" in line or ("reached the end offsets" in line and not self.saw_done_line):
                self.saw_done_line = "bounded run done" in line
                self.done_at = now
            if "loop profile:" in line:
                self.profile = line.split("loop profile:", 1)[1].strip()

    def wait(self, timeout):
        pid, status, usage = os.wait4(self.proc.pid, 0)
        self.reader.join(timeout=5)
        self.end = time.monotonic()
        if self.done_at is None:
            self.done_at = self.end
        self.status = os.waitstatus_to_exitcode(status)
        self.peak_rss_kb = usage.ru_maxrss
        return usage.ru_utime + usage.ru_stime


def enriched_records(bootstrap):
    """Records in events.enriched and how many of them repeat an earlier one byte for byte (an event
    processed twice, e.g. re-read after a rebalance, gives the same record: the stages are deterministic)."""
    kcat = subprocess.Popen(["kcat", "-C", "-b", bootstrap, "-t", "events.enriched", "-o", "beginning", "-e", "-q",
                             "-f", "%s\\n"], stdout=subprocess.PIPE)
    seen = set()
    total = 0
    for line in kcat.stdout:
        total += 1
        seen.add(hashlib.blake2b(line, digest_size=16).digest())
    kcat.wait()
    return {"records": total, "duplicates": total - len(seen)}


def dropped_records(bootstrap, topics):
    """Per topic, how many records the broker dropped from the front of its partitions (the sum of their log
    start offsets: nothing is ever deleted otherwise, so a start above 0 is records lost to the size cap)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"through-broker-check-{os.getpid()}"})
    try:
        out = {}
        for name, partitions in topics:
            out[name] = sum(c.get_watermark_offsets(TopicPartition(name, i), timeout=10)[0] for i in range(partitions))
        return out
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recording")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--internal-partitions", type=int, default=None,
                    help="partitions of the group's internal topic (default: as many as --partitions); the offline "
                         "figure over the same partitions uses the same count")
    ap.add_argument("--pipeline", default="pipelines/app-analytics.yaml")
    ap.add_argument("--bin", default=None, help="the maidian binary (default: the release build)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--offline-runs", type=int, default=1,
                    help="passes of each offline `maidian bench` (it reports the one with the least CPU time); "
                         "3 steadies the shares on a noisy machine")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ap.add_argument("--busy", type=int, default=0,
                    help="processes that keep a core busy each while the workers run (a loaded machine)")
    ap.add_argument("--duplicates", action="store_true",
                    help="after the run, read events.enriched (kcat) and count records written more than once")
    ap.add_argument("--logs", default=None,
                    help="a directory to write each worker's log to (worker-N.log, each line with the seconds since "
                         "the first assignment), to see its rebalances and its tail")
    ap.add_argument("--log-level", default="info",
                    help="the workers' log level (debug shows each commit and more; it costs a little)")
    args = ap.parse_args()
    binary = args.bin or release_bin()
    recording = os.path.abspath(args.recording)

    runs = str(max(1, args.offline_runs))
    bench = subprocess.run([binary, "bench", args.pipeline, "--recording", recording, "--runs", runs, "--json"],
                           cwd=ROOT, capture_output=True, text=True, check=True)
    events = json.loads(bench.stdout)["events"]
    # The same over as many partitions as the broker run: every source partition sends its progress to every internal
    # partition, so a worker over 32 partitions does more work than `maidian bench` over its default 8.
    # (`maidian bench` spreads over 8 by default: over 8, the first pass is that figure already.)
    internal = args.partitions if args.internal_partitions is None else args.internal_partitions
    if internal < 1:
        sys.exit("through_broker: --internal-partitions must be at least 1")
    bench_same = bench if args.partitions == 8 and internal == 8 else subprocess.run(
        [binary, "bench", args.pipeline, "--recording", recording, "--runs", runs, "--json", "--partitions", str(args.partitions),
         "--internal-partitions", str(internal)],
        cwd=ROOT, capture_output=True, text=True, check=True)

    group = f"through-broker-{os.getpid()}"
    p = args.partitions
    small = max(4, p // 4)
    topic_list = [("events.raw", p), ("events.enriched", p), ("events.dlq", small), ("metrics.counts", small),
                  ("metrics.dwell", small), ("crash.trails", small), (f"{group}.partials", internal)]
    topics = ",".join(f"{name}:{n}" for name, n in topic_list)
    with tempfile.TemporaryDirectory() as tmp:
        addr_file = os.path.join(tmp, "broker.addr")
        with open(addr_file, "w") as out:
            broker = subprocess.Popen([binary, "broker", "--topics", topics, "--log-level", "warning"],
                                      stdout=out, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if os.path.getsize(addr_file) > 0:
                    break
                time.sleep(0.05)
            bootstrap = open(addr_file).readline().strip()
            env = dict(os.environ, MAIDIAN_BROKERS=bootstrap, MAIDIAN_GROUP=group, MAIDIAN_SESSION_TIMEOUT="6s")
            subprocess.run([binary, "produce", recording, "--brokers", bootstrap, "--topic", "events.raw",
                            "--log-level", "warning"], cwd=ROOT, env=env, check=True)
            broker_cpu_before = proc_cpu_seconds(broker.pid)
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
            try:
                workers = [Worker(binary, args.pipeline, env, i, args.log_level) for i in range(args.workers)]
                cpu = [w.wait(args.timeout) for w in workers]
            finally:
                for b in busy:
                    b.kill()
                    b.wait()
            broker_cpu = proc_cpu_seconds(broker.pid) - broker_cpu_before
            dropped = dropped_records(bootstrap, topic_list)
            if args.duplicates:
                enriched = enriched_records(bootstrap)
        finally:
            broker.terminate()
            broker.wait()

    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
        for w in workers:
            # Each line with the seconds since the first assignment of the run (the span's start), to see the tail.
            t0 = min((x.assigned_at for x in workers if x.assigned_at is not None), default=None)
            with open(os.path.join(args.logs, f"worker-{w.index}.log"), "w") as f:
                for t, line in zip(w.line_times, w.lines):
                    f.write((f"{t - t0:+8.3f} " if t0 is not None else "") + line + "\n")
    if dropped["events.raw"] > 0:
        sys.exit(f"through_broker: the broker dropped {dropped['events.raw']} of the recording's records from "
                 f"events.raw (it keeps 5 MiB per partition): the workers read only the rest, so there is no figure. "
                 f"Use more partitions than {p}.")
    if args.duplicates and dropped["events.enriched"] > 0:
        sys.exit(f"through_broker: the broker dropped {dropped['events.enriched']} records of events.enriched "
                 f"(5 MiB per partition), so its duplicates cannot be counted. Use more partitions than {p}.")
    failed = [w for w in workers if w.status != 0]
    for w in failed:
        sys.stderr.write(f"worker {w.index} exited {w.status}; its last lines:\n" + "\n".join(w.lines[-20:]) + "\n")
    starts = [w.assigned_at for w in workers if w.assigned_at is not None]
    if not starts:
        sys.exit("no worker was ever assigned a partition")
    span = max(w.done_at for w in workers) - min(starts)
    result = {
        "events": events,
        "workers": args.workers,
        "partitions": p,
        "internal_partitions": internal,
        "seconds_assignment_to_end": round(span, 3),
        "events_per_second": round(events / span),
        # Per worker: seconds from its last "reached the end offsets" to its end (the tail of a bounded run).
        "tail_seconds": [round(w.done_at - w.reached_end_at, 3) if w.reached_end_at else None for w in workers],
        "worker_cpu_seconds": [round(c, 3) for c in cpu],
        "events_per_worker_cpu_second": round(events / sum(cpu)),
        "broker_cpu_seconds": round(broker_cpu, 3),
        "worker_peak_rss_mib": [round(w.peak_rss_kb / 1024) for w in workers],
        "offline_events_per_cpu_second": json.loads(bench.stdout).get("events_per_cpu_s"),
        "offline_same_partitions_events_per_cpu_second": json.loads(bench_same.stdout).get("events_per_cpu_s"),
        "offline_same_partitions_output_messages": json.loads(bench_same.stdout).get("output_messages"),
        # Each offline figure is the best (least CPU) of this many passes.
        "offline_runs": int(runs),
        "failed_workers": len(failed),
        # Per worker: seconds/calls per phase of its loop (poll, stages, produce, deliveries, commits, flush)
        # and the polls that returned nothing: what the worker waited on.
        "loop_profiles": [w.profile for w in workers],
        "busy_processes": args.busy,
        # Records the broker dropped per topic (its 5 MiB per partition cap); events.raw is always 0 here.
        "dropped_records": {k: v for k, v in dropped.items() if v},
    }
    if args.duplicates:
        result["enriched_records"] = enriched["records"]
        result["enriched_duplicates"] = enriched["duplicates"]
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{events} events, {args.workers} worker(s), {p} partitions ({internal} internal): "
              f"{result['seconds_assignment_to_end']} s from assignment to the end offsets, "
              f"{result['events_per_second']} events/s; worker CPU {sum(cpu):.2f} s "
              f"({result['events_per_worker_cpu_second']} events per CPU second, peak RSS {result['worker_peak_rss_mib']} MiB), "
              f"broker CPU {broker_cpu:.2f} s; "
              f"offline (maidian bench): {result['offline_events_per_cpu_second']} events per CPU second, "
              f"{result['offline_same_partitions_events_per_cpu_second']} over {p} partitions")
        for w in workers:
            print(f"  worker {w.index} loop: {w.profile or '(no profile logged)'}")
        if args.duplicates:
            share = enriched["duplicates"] / max(1, enriched["records"])
            print(f"  events.enriched: {enriched['records']} records, {enriched['duplicates']} duplicates ({share:.2%})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
