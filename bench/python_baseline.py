#!/usr/bin/env python3
"""The work of `maidian bench` (wire format §1, §2, §5) in plain Python with orjson and zstandard.

    python3 -m pip install orjson zstandard
    python3 bench/python_baseline.py "$(scripts/bench-recording.sh)"

Reads a recording (.ndjson or .ndjson.zst), base64-decodes the values (untimed), then times: decompress,
parse, validate and fix, calibrate time, de-duplicate, add presets, serialize enriched events and dead letters.
Prints one JSON line (events/s over all decoded events, MB/s of decompressed JSON).
"""
import base64, io, re, sys, time
import orjson, zstandard

MAX_RECORD, MAX_JSON, MAX_EVENTS = 1 << 20, 16 << 20, 10_000
MAX_STRING, MAX_DISTINCT_ID, MAX_SKEW, DEDUP_WINDOW = 8191, 255, 60_000, 600_000
NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,99}")
TRACK = {"track", "track_signup"}
PROFILE = {"profile_set", "profile_set_once", "profile_increment", "profile_delete", "profile_append", "profile_unset"}
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

def load(path):
    raw = open(path, "rb").read()
    if path.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()
    out = []
    for line in raw.splitlines():
        if line.strip():
            r = orjson.loads(line)
            out.append((r.get("key"), r.get("headers") or {}, base64.b64decode(r["value_b64"])))
    return out

def check(e):
    """The dead-letter reason of an event, or None (wire format §2, validation)."""
    if type(e) is not dict: return "not_object"
    t = e.get("type")
    if t not in TRACK and t not in PROFILE: return "bad_type"
    if t in TRACK:
        name = e.get("event")
        if type(name) is not str or not NAME.fullmatch(name): return "bad_event_name"
    if type(e.get("time")) is not int: return "bad_time"
    d = e.get("distinct_id")
    if type(d) is not str or not d or (len(d) > 63 and len(d.encode()) > MAX_DISTINCT_ID): return "bad_distinct_id"
    if "properties" in e and type(e["properties"]) is not dict: return "bad_properties"
    return None

def fix_properties(props):
    dropped = []
    for k, v in list(props.items()):
        if not NAME.fullmatch(k) or v is None or (type(v) is dict and k != "$element_content"):
            del props[k]
            dropped.append(k)
        elif type(v) is str and len(v) > MAX_STRING // 4 and len(v.encode()) > MAX_STRING:
            props[k] = v.encode()[:MAX_STRING].decode("utf-8", "ignore") + "$"
        elif type(v) is list and any(type(x) is not str for x in v):
            props[k] = [x for x in v if type(x) is str]
    if dropped and "$dropped_properties" not in props:
        props["$dropped_properties"] = dropped

class Dedup:
    """Two generations of at most a window of event time each: an entry lives one to two windows."""
    def __init__(self):
        self.current, self.previous, self.start, self.duplicates = {}, {}, None, 0

    def seen(self, key, t):
        if self.start is None: self.start = t
        if t - self.start > DEDUP_WINDOW:
            self.previous, self.current, self.start = self.current, {}, t
        first = self.current.get(key, self.previous.get(key))
        if first is not None and abs(t - first) <= DEDUP_WINDOW:
            self.duplicates += 1
            return True
        self.current[key] = t
        return False

def run(records):
    dctx, dedup = zstandard.ZstdDecompressor(), Dedup()
    reasons, out = {}, {"enriched": 0, "dlq": 0, "bytes": 0}
    events = json_bytes = 0

    def emit(topic, key, value):  # stands in for the producer: the bytes are made, counted and dropped
        out[topic] += 1
        out["bytes"] += len(value) + len(key or "")

    def dead(key, reason, detail, offset, extra):
        reasons[reason] = reasons.get(reason, 0) + 1
        emit("dlq", key, orjson.dumps({"reason": reason, "detail": detail,
                                       "source": {"topic": "events.raw", "partition": 0, "offset": offset}, **extra}))

    for offset, (key, headers, value) in enumerate(records):
        whole = lambda reason, detail: dead(key, reason, detail, offset, {"payload_b64": base64.b64encode(value).decode()})
        if len(value) > MAX_RECORD: whole("too_large", "record value too large"); continue
        if value[:4] == ZSTD_MAGIC:
            try:
                text = dctx.stream_reader(value, read_across_frames=True).read(MAX_JSON + 1)
            except zstandard.ZstdError as e:
                whole("bad_zstd", f"zstd: {e}"); continue
            if len(text) > MAX_JSON: whole("too_large", "decompressed value too large"); continue
        elif value.lstrip()[:1] == b"[":
            text = value
        else:
            whole("bad_encoding", "neither zstd nor JSON"); continue
        json_bytes += len(text)
        try:
            batch = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            whole("bad_json", str(e)); continue
        if type(batch) is not list: whole("not_array", "not a JSON array"); continue
        if len(batch) > MAX_EVENTS: whole("too_large", "too many events"); continue
        events += len(batch)
        ip, project = headers.get("ip"), headers.get("project")
        received_at = headers.get("received_at")
        received_at = int(received_at) if received_at and received_at.isdigit() else None
        for i, e in enumerate(batch):
            reason = check(e)
            if reason:
                dead(key, reason, reason, offset, {"index": i, "payload": e}); continue
            if e["type"] not in TRACK:  # profile events pass untouched
                emit("enriched", e["distinct_id"], orjson.dumps(e)); continue
            props = e.setdefault("properties", {})
            fix_properties(props)
            client_time = t = e["time"]
            flush = e.get("_flush_time")
            if received_at is not None and type(flush) is int and abs(received_at - flush) > MAX_SKEW:
                t = e["time"] = t + received_at - flush
                props.setdefault("$client_time", client_time)
            track_id = e.get("_track_id")
            if type(track_id) is int and dedup.seen((e["distinct_id"], track_id, client_time, e["event"]), t): continue
            if ip: props.setdefault("$ip", ip)
            if received_at is not None: props.setdefault("$receive_time", received_at)
            props.setdefault("$project", e.get("project") if type(e.get("project")) is str else project or "default")
            emit("enriched", e["distinct_id"], orjson.dumps(e))
    return events, json_bytes, out, reasons, dedup.duplicates

def main():
    if len(sys.argv) != 2: sys.exit("usage: python_baseline.py RECORDING(.ndjson|.ndjson.zst)")
    records = load(sys.argv[1])
    start = time.perf_counter()
    events, json_bytes, out, reasons, duplicates = run(records)
    seconds = time.perf_counter() - start
    print(orjson.dumps({
        "records": len(records), "events": events, "seconds": round(seconds, 4),
        "events_per_s": int(events / seconds), "mb_per_s": round(json_bytes / 1e6 / seconds, 1),
        "enriched": out["enriched"], "dlq": dict(sorted(reasons.items())), "duplicates": duplicates,
        "output_messages": out["enriched"] + out["dlq"], "output_bytes": out["bytes"],
    }).decode())

if __name__ == "__main__":
    main()
