#!/usr/bin/env python3
"""Checks the files under deploy/ without Grafana, Prometheus or a Kubernetes cluster at hand.

    python3 scripts/check_deploy.py                  # validate; exit 1 with one line per problem
    python3 scripts/check_deploy.py --series         # also print every maidian_* series they query
    python3 scripts/check_deploy.py --extract-config DIR   # write the Kubernetes ConfigMap's files into DIR

- deploy/grafana/maidian-dashboard.json against deploy/grafana/dashboard.schema.json (JSON Schema), with
  unique panel ids and template variables that the queries use defined;
- deploy/prometheus/alerts.yml: every rule has a name, an expression, a severity and a summary, and
  durations Prometheus reads; the alerts the operations docs promise are there;
- deploy/kubernetes/*.yaml: every document has a kind and a name, the Deployment has liveness and readiness
  probes on the metrics port, the ConfigMap holds the pipeline and the rules.

Whether the queried series exist is checked against a running worker by the Swift test DeployTests
(it runs this script with --series).
"""
import json
import os
import pathlib
import re
import sys

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
# MAIDIAN_DEPLOY_DIR: check another copy (the tests check a broken one, to see the checks fail).
DEPLOY = pathlib.Path(os.environ.get("MAIDIAN_DEPLOY_DIR", ROOT / "deploy")).resolve()
SERIES = re.compile(r"\bmaidian_[a-z0-9_]+")
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
# What docs/operations.md promises an operator is alerted on.
REQUIRED_ALERTS = {"MaidianConsumerLagHigh", "MaidianEventTimeLagHigh", "MaidianDeadLetterRateHigh",
                   "MaidianWorkerDown", "MaidianWorkerNotLive", "MaidianRulesReloadFailed"}


def rel(path):
    return os.path.relpath(path, ROOT)


def check_dashboard(problems, queries):
    path = DEPLOY / "grafana/maidian-dashboard.json"
    schema = json.loads((DEPLOY / "grafana/dashboard.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    dashboard = json.loads(path.read_text())
    for e in jsonschema.Draft202012Validator(schema).iter_errors(dashboard):
        problems.append(f"{rel(path)}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
    ids = [p.get("id") for p in dashboard.get("panels", [])]
    for dup in sorted({i for i in ids if ids.count(i) > 1}, key=str):
        problems.append(f"{rel(path)}: panel id {dup} used more than once")
    variables = {v.get("name") for v in dashboard.get("templating", {}).get("list", [])}
    builtin = {"__rate_interval", "__interval", "__range"}
    for p in dashboard.get("panels", []):
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            queries.append((f"{rel(path)}: panel '{p.get('title')}'", expr))
            for v in re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expr):
                if v not in variables and v not in builtin:
                    problems.append(f"{rel(path)}: panel '{p.get('title')}' uses undefined variable ${v}")
    for v in dashboard.get("templating", {}).get("list", []):
        if isinstance(v.get("query"), str):
            queries.append((f"{rel(path)}: variable {v.get('name')}", v["query"]))


def check_alerts(problems, queries):
    path = DEPLOY / "prometheus/alerts.yml"
    doc = yaml.safe_load(path.read_text())
    names = set()
    for g in doc.get("groups", []):
        if not g.get("name"):
            problems.append(f"{rel(path)}: a group without a name")
        for r in g.get("rules", []):
            name = r.get("alert")
            where = f"{rel(path)}: {name or 'a rule without alert'}"
            if not name:
                problems.append(where)
                continue
            names.add(name)
            if not isinstance(r.get("expr"), str) or not r["expr"].strip():
                problems.append(f"{where}: no expr")
            else:
                queries.append((where, r["expr"]))
            if "for" in r and not DURATION.match(str(r["for"])):
                problems.append(f"{where}: 'for: {r['for']}' is not a Prometheus duration")
            if r.get("labels", {}).get("severity") not in ("page", "warning", "info"):
                problems.append(f"{where}: labels.severity must be page, warning or info")
            if not r.get("annotations", {}).get("summary"):
                problems.append(f"{where}: no annotations.summary")
            unknown = set(r) - {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
            if unknown:
                problems.append(f"{where}: unknown keys {sorted(unknown)}")
    for missing in sorted(REQUIRED_ALERTS - names):
        problems.append(f"{rel(path)}: alert {missing} is missing")
    prom = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    if "/etc/prometheus/alerts.yml" not in prom.get("rule_files", []):
        problems.append("deploy/prometheus/prometheus.yml: does not load alerts.yml")


def kubernetes_documents():
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                yield path, doc


def check_kubernetes(problems):
    kinds = set()
    for path, doc in kubernetes_documents():
        where = rel(path)
        if not doc.get("apiVersion") or not doc.get("kind") or not doc.get("metadata", {}).get("name"):
            problems.append(f"{where}: a document without apiVersion, kind or metadata.name")
            continue
        kinds.add(doc["kind"])
        if doc["kind"] == "ConfigMap":
            for key in ("app-analytics.yaml", "rules.yaml"):
                if key not in doc.get("data", {}):
                    problems.append(f"{where}: ConfigMap has no {key}")
                else:
                    yaml.safe_load(doc["data"][key])
        if doc["kind"] == "Deployment":
            spec = doc["spec"]["template"]["spec"]
            for c in spec["containers"]:
                ports = {p.get("name") for p in c.get("ports", [])}
                for probe, path_ in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready")):
                    get = c.get(probe, {}).get("httpGet", {})
                    if get.get("path") != path_ or get.get("port") not in ports | {9464}:
                        problems.append(f"{where}: container {c['name']}: {probe} must GET {path_} on the metrics port")
    for kind in ("ConfigMap", "Deployment"):
        if kind not in kinds:
            problems.append(f"deploy/kubernetes: no {kind}")


def extract_config(directory):
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for _, doc in kubernetes_documents():
        if doc.get("kind") == "ConfigMap":
            for key, text in doc.get("data", {}).items():
                (out / key).write_text(text)
                print(out / key)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--extract-config":
        extract_config(sys.argv[2])
        return 0
    problems, queries = [], []
    check_dashboard(problems, queries)
    check_alerts(problems, queries)
    check_kubernetes(problems)
    for p in problems:
        print(p, file=sys.stderr)
    if "--series" in sys.argv:
        for s in sorted({s for _, q in queries for s in SERIES.findall(q)}):
            print(s)
    else:
        print(f"deploy/: dashboard, {len([q for q in queries if 'alerts' in q[0]])} alert rules and Kubernetes manifests: "
              + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
