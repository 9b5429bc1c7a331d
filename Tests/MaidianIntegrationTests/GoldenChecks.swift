import Foundation
import XCTest

/// The checks of wire format §5's windowed outputs against `sample.expected.json`, shared by the golden and
/// the chaos tests: `metrics.counts` (last value per key) equals `counts` and `dwell_agg`; `metrics.dwell`
/// holds every `dwell_exact` record and each `dwell_loose` visit once, and nothing else (identical duplicates
/// allowed, wire format §5 "Failover"); `crash.trails` equals `trails` (as a set).
enum GoldenChecks {
    static func json(_ text: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
    }

    /// A canonical text of a JSON value (sorted keys) for set comparisons.
    static func canonical(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
    }

    static func int(_ v: Any?) -> Int? { (v as? NSNumber)?.intValue }

    static func checkWindows(records: [Integration.DumpedRecord], expected: [String: Any], file: StaticString = #filePath, line: UInt = #line) throws {
        // metrics.counts: the last value per key is the answer.
        var last: [String: [String: Any]] = [:]
        for r in records where r.topic == "metrics.counts" {
            guard let key = r.key else { XCTFail("metrics.counts record without key", file: file, line: line); continue }
            last[key] = try json(r.value)
        }
        var want: [String: String] = [:]
        for (key, v) in expected["counts"] as! [String: [String: Any]] {
            want[key] = try canonical(["count": v["count"]!, "users": v["users"]!, "dims": v["dims"]!])
        }
        for (key, v) in expected["dwell_agg"] as! [String: [String: Any]] {
            want[key] = try canonical(["count": v["count"]!, "users": v["users"]!, "sum_ms": v["sum_ms"]!])
        }
        var got: [String: String] = [:]
        for (key, v) in last {
            if v["metric"] as? String == "dwell" {
                got[key] = try canonical(["count": v["count"]!, "users": v["users"]!, "sum_ms": v["sum_ms"]!])
                // The record's own arithmetic.
                if let c = int(v["count"]), let sum = int(v["sum_ms"]), c > 0 {
                    XCTAssertEqual(int(v["avg_ms"]), (sum + c / 2) / c, "avg_ms of \(key)", file: file, line: line)
                }
            } else {
                got[key] = try canonical(["count": v["count"]!, "users": v["users"]!, "dims": v["dims"]!])
            }
            let parts = key.split(separator: "|", omittingEmptySubsequences: false)
            XCTAssertEqual(parts.count, 4, "key shape \(key)", file: file, line: line)
            if parts.count == 4 {
                XCTAssertEqual(v["metric"] as? String, String(parts[0]), file: file, line: line)
                XCTAssertEqual(v["rule"] as? String, String(parts[1]), file: file, line: line)
                XCTAssertEqual(int(v["window_start"]).map(String.init), String(parts[2]), file: file, line: line)
                XCTAssertEqual(int(v["window_end"]), int(v["window_start"]).map { $0 + (expected["window_ms"] as? Int ?? 60000) }, file: file, line: line)
            }
        }
        let differing = Set(want.keys).union(got.keys).filter { want[$0] != got[$0] }.sorted()
        for key in differing.prefix(10) {
            XCTFail("metrics.counts \(key): want \(want[key] ?? "<none>"), got \(got[key] ?? "<none>")", file: file, line: line)
        }
        XCTAssertEqual(differing.count, 0, "metrics.counts keys differing from counts + dwell_agg (of \(want.count))", file: file, line: line)

        // metrics.dwell: exact records, loose visits once, nothing else.
        var dwell = Set<String>()
        for r in records where r.topic == "metrics.dwell" {
            let o = try json(r.value)
            XCTAssertEqual(r.key, o["distinct_id"] as? String, "metrics.dwell key is distinct_id", file: file, line: line)
            dwell.insert(try canonical(o))
        }
        var rest = dwell
        var missing = 0
        // As a set: identical visits (a clamped clock puts a whole session at one instant) are one record in an
        // output that may hold identical duplicates anyway.
        var exact = Set<String>()
        for e in expected["dwell_exact"] as! [[String: Any]] { exact.insert(try canonical(e)) }
        for c in exact.sorted() {
            if rest.remove(c) == nil {
                missing += 1
                if missing <= 5 { XCTFail("metrics.dwell lacks \(c)", file: file, line: line) }
            }
        }
        XCTAssertEqual(missing, 0, "dwell_exact records missing", file: file, line: line)
        var restObjects = try rest.map { (text: $0, object: try json($0)) }
        for l in expected["dwell_loose"] as! [[String: Any]] {
            let options = (l["closed_by"] as! String).split(separator: "|").map(String.init)
            let found = restObjects.firstIndex { r in
                r.object["distinct_id"] as? String == l["distinct_id"] as? String && r.object["page"] as? String == l["page"] as? String
                    && int(r.object["enter_time"]) == int(l["enter_time"]) && options.contains(r.object["closed_by"] as? String ?? "")
            }
            if let found { restObjects.remove(at: found) } else { XCTFail("metrics.dwell lacks the loose visit \(l)", file: file, line: line) }
        }
        for r in restObjects.prefix(5) { XCTFail("metrics.dwell has an unexpected record \(r.text)", file: file, line: line) }
        XCTAssertEqual(restObjects.count, 0, "unexpected metrics.dwell records", file: file, line: line)

        // crash.trails.
        var trails = Set<String>()
        for r in records where r.topic == "crash.trails" {
            let o = try json(r.value)
            XCTAssertEqual(r.key, o["distinct_id"] as? String, "crash.trails key is distinct_id", file: file, line: line)
            trails.insert(try canonical(o))
        }
        let wantTrails = Set(try (expected["trails"] as! [[String: Any]]).map { try canonical($0) })
        // The records themselves, not only how many: a trail that differs from the answer shows which entries
        // it lacks or adds (a failover that rebuilt an install's state from too short a re-read, say).
        for t in trails.subtracting(wantTrails).sorted().prefix(5) { XCTFail("crash.trails has an unexpected record \(t)", file: file, line: line) }
        for t in wantTrails.subtracting(trails).sorted().prefix(5) { XCTFail("crash.trails lacks the record \(t)", file: file, line: line) }
        XCTAssertEqual(trails.subtracting(wantTrails).count, 0, "unexpected crash.trails records", file: file, line: line)
        XCTAssertEqual(wantTrails.subtracting(trails).count, 0, "missing crash.trails records", file: file, line: line)
    }
}
