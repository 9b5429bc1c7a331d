#!/usr/bin/env python3
"""Recordings of clicks that never repeat, for the windows stage's memory bounds (docs/hostile-input.md).

Writes N `$AppClick` events, 50 per record, from 500 users, 10 ms apart, to an .ndjson recording. `--vary`
picks what differs from click to click: `content` (each its own `$element_content`), `version` (each its own
`$app_version`) or `path` (each its own `$element_path`: distinct element identifiers, which the rule does not
match). The clicks are
on `HomeViewController` at `UIWindow-UITransitionView-UIView` / `UIButton`; `--rules FILE` also writes a rules
file with one `group_by_content` rule that matches them all.

    python3 bench/distinct_clicks.py 1600000 /tmp/c1600k.ndjson --vary content --rules /tmp/rules-content.yaml
    MAIDIAN_RULES=/tmp/rules-content.yaml maidian bench pipelines/app-analytics.yaml --recording /tmp/c1600k.ndjson --runs 1 --no-merge
"""
import argparse
import base64
import json

import zstandard


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("events", type=int)
    ap.add_argument("out")
    ap.add_argument("--vary", choices=["content", "version", "path"], default="content")
    ap.add_argument("--rules", default=None, help="also write a rules file whose one rule matches every click")
    args = ap.parse_args()
    compressor = zstandard.ZstdCompressor()
    t0 = 1763700000000
    per = 50
    with open(args.out, "w") as f:
        for r in range(args.events // per):
            user = f"u{r % 500}"
            events = []
            for i in range(per):
                k = r * per + i
                props = {"$screen_name": "HomeViewController", "$app_version": "3.2.1",
                         "$element_path": "UIWindow-UITransitionView-UIView", "$element_type": "UIButton",
                         "$element_position": "0", "$element_content": "Sale"}
                if args.vary == "content":
                    props["$element_content"] = "order-%012d-" % k + "x" * 80
                elif args.vary == "version":
                    props["$app_version"] = "3.%d" % k
                else:
                    props["$element_path"] = "UIWindow-UITransitionView-UIView-UIView%d" % k
                events.append({"type": "track", "event": "$AppClick", "time": t0 + k * 10, "distinct_id": user,
                               "_track_id": k, "properties": props})
            value = compressor.compress(json.dumps(events).encode())
            ts = t0 + (r + 1) * per * 10
            f.write(json.dumps({"key": user, "headers": {"received_at": str(ts)}, "timestamp": ts,
                                "value_b64": base64.b64encode(value).decode()}) + "\n")
    if args.rules:
        with open(args.rules, "w") as f:
            f.write("version: 1\nelements:\n  - id: buttons_by_content\n    screen: HomeViewController\n"
                    "    path: \"UIWindow-UITransitionView-UIView\"\n    type: UIButton\n    group_by_content: true\n")


if __name__ == "__main__":
    main()
