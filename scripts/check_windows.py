#!/usr/bin/env python3
"""Compares dumped metrics.counts / metrics.dwell / crash.trails records (kafka_dump_topics.py output) with
sample.expected.json the way the golden test does, and prints the differences (a development aid).

Usage: check_windows.py DUMP.jsonl EXPECTED.json
"""
import json
import sys
from collections import Counter


def main():
    dump, expected_path = sys.argv[1:3]
    exp = json.load(open(expected_path))
    counts, dwell, trails = {}, [], []
    for line in open(dump):
        r = json.loads(line)
        v = json.loads(r["value"])
        if r["topic"] == "metrics.counts":
            counts[r["key"]] = v  # last value per key
        elif r["topic"] == "metrics.dwell":
            dwell.append(v)
        elif r["topic"] == "crash.trails":
            trails.append(v)
    bad = 0
    want = {}
    for k, v in exp["counts"].items():
        want[k] = {"count": v["count"], "users": v["users"], "dims": v["dims"]}
    for k, v in exp["dwell_agg"].items():
        want[k] = {"count": v["count"], "users": v["users"], "sum_ms": v["sum_ms"]}
    got = {}
    for k, v in counts.items():
        g = {"count": v["count"], "users": v["users"]}
        if v["metric"] == "dwell":
            g["sum_ms"] = v["sum_ms"]
        else:
            g["dims"] = v["dims"]
        got[k] = g
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            bad += 1
            if bad <= 15:
                print("counts", k, "want", want.get(k), "got", got.get(k))
    print("counts keys: want", len(want), "got", len(got), "differing", bad)

    def norm(d):
        return json.dumps(d, sort_keys=True)
    got_dwell = Counter(norm(d) for d in dwell)
    exact = Counter(norm(d) for d in exp["dwell_exact"])
    missing = exact - got_dwell
    print("dwell exact: want", sum(exact.values()), "missing", sum(missing.values()))
    for m in list(missing)[:5]:
        print("  missing", m)
    rest = got_dwell - exact
    loose_ok = 0
    rest_list = [json.loads(x) for x in rest.elements()]
    for lv in exp["dwell_loose"]:
        opts = lv["closed_by"].split("|")
        hit = [r for r in rest_list if r["distinct_id"] == lv["distinct_id"] and r["page"] == lv["page"] and r["enter_time"] == lv["enter_time"] and r["closed_by"] in opts]
        if hit:
            loose_ok += 1
            rest_list.remove(hit[0])
        else:
            print("  loose missing", lv, [r for r in rest_list if r["distinct_id"] == lv["distinct_id"] and r["enter_time"] == lv["enter_time"]])
    print("dwell loose: want", len(exp["dwell_loose"]), "found", loose_ok, "extra records", len(rest_list))
    for x in rest_list[:5]:
        print("  extra", x)
    got_trails = Counter(norm(t) for t in trails)
    want_trails = Counter(norm(t) for t in exp["trails"])
    print("trails: want", sum(want_trails.values()), "got distinct", len(got_trails), "missing", sum((want_trails - got_trails).values()), "extra distinct", len(set(got_trails) - set(want_trails)))
    for m in list(want_trails - got_trails)[:2]:
        print("  missing trail", m[:400])
    for m in list(set(got_trails) - set(want_trails))[:2]:
        print("  extra trail", m[:400])


if __name__ == "__main__":
    main()
