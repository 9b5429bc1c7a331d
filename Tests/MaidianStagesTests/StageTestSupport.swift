import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
@testable import MaidianStages

/// A record for tests: value bytes plus the headers wire format §1 defines.
struct TestRecord {
    var key: String? = "install-1"
    var value: [UInt8]
    var ip: String? = "1.0.1.3"
    var receivedAt: Int64? = 1_763_700_000_000
    var ua: String? = nil
    var project: String? = nil
    var partition: Int32 = 0
    /// Re-read to rebuild state after a takeover (`InputRecord.replay`).
    var replay = false

    init(json: String, key: String? = "install-1", ip: String? = "1.0.1.3", receivedAt: Int64? = 1_763_700_000_000, project: String? = nil, partition: Int32 = 0, replay: Bool = false) {
        self.value = Array(json.utf8)
        self.key = key
        self.ip = ip
        self.receivedAt = receivedAt
        self.project = project
        self.partition = partition
        self.replay = replay
    }

    init(bytes: [UInt8]) { self.value = bytes }
}

/// Runs records through the given stages and the two outputs; returns parsed outputs.
final class StageHarness {
    var batch = EventBatch()
    var output = OutputBuffer()
    let decoder: RecordDecoder
    var stages: [any Stage]
    let enriched: EnrichedOutput
    let dlq: DeadLetterOutput
    /// Next offset per partition.
    var offsets: [Int32: Int64] = [:]

    init(stages: [any Stage], limits: RecordLimits = RecordLimits()) throws {
        self.decoder = RecordDecoder(limits: limits)
        self.stages = stages
        let ctx = StageHarness.context()
        self.enriched = try EnrichedOutput(config: .init(), context: ctx)
        self.dlq = try DeadLetterOutput(config: .init(), context: ctx)
    }

    static func context() -> StageContext {
        StageContext(logger: Logger(label: "test"), baseDirectory: "", position: "0")
    }

    /// Standard pipeline: validate, calibrate_time, dedup, record_presets.
    static func standard() throws -> StageHarness {
        let ctx = context()
        return try StageHarness(stages: [
            ValidateStage(config: .init(), context: ctx),
            CalibrateTimeStage(config: .init(), context: ctx),
            DedupStage(config: .init(), context: ctx),
            RecordPresetsStage(config: .init(), context: ctx),
        ])
    }

    struct Result {
        var enriched: [(key: String, value: [String: Any], raw: String)] = []
        var dlq: [(key: String?, value: [String: Any])] = []
        var events: [Event] = []
    }

    /// Decodes the records as one batch and runs the stages and the two outputs; `batch` and `output` keep
    /// what came out.
    func feed(_ records: [TestRecord]) throws {
        batch.reset()
        output.reset()
        let t = batch.topicIndex("events.raw")
        for r in records {
            func opt(_ s: String?, _ body: (UnsafeRawBufferPointer?) -> Void) {
                if let s { Array(s.utf8).withUnsafeBytes { body($0) } } else { body(nil) }
            }
            let offset = offsets[r.partition, default: 0]
            r.value.withUnsafeBytes { v in
                opt(r.key) { k in opt(r.ip) { ip in opt(r.receivedAt.map { String($0) }) { rat in opt(r.ua) { ua in opt(r.project) { pr in
                    batch.appendRecord(topic: t, partition: r.partition, offset: offset, timestamp: 0, key: k, value: v, ip: ip, receivedAt: rat, ua: ua, project: pr)
                } } } } }
            }
            batch.records[batch.records.count - 1].replay = r.replay
            offsets[r.partition] = offset + 1
        }
        decoder.decodeAll(&batch)
        for s in stages { try s.process(&batch, output: &output) }
        try enriched.process(&batch, output: &output)
        try dlq.process(&batch, output: &output)
    }

    func run(_ records: [TestRecord]) throws -> Result {
        try feed(records)
        var result = Result()
        result.events = (0..<batch.eventCount).map { batch.event($0) }
        let enrichedTopic = output.topicIndex("events.enriched")
        for (i, m) in output.messages.enumerated() {
            let raw = output.valueString(i)
            let obj = try JSONSerialization.jsonObject(with: Data(raw.utf8), options: [.fragmentsAllowed]) as? [String: Any] ?? [:]
            if m.topic == enrichedTopic {
                result.enriched.append((output.keyString(i) ?? "", obj, raw))
            } else {
                result.dlq.append((output.keyString(i), obj))
            }
        }
        return result
    }
}

/// A valid track event as JSON text, with overrides.
func trackEvent(
    event: String = "$AppClick", time: Int64 = 1_763_700_000_000, distinctID: String = "u1", trackID: Int64? = 1,
    flushTime: Int64? = nil, properties: String = "{\"$screen_name\":\"HomeViewController\"}"
) -> String {
    var s = "{\"type\":\"track\",\"event\":\"\(event)\",\"time\":\(time),\"distinct_id\":\"\(distinctID)\""
    if let trackID { s += ",\"_track_id\":\(trackID)" }
    if let flushTime { s += ",\"_flush_time\":\(flushTime)" }
    s += ",\"properties\":\(properties)}"
    return s
}
