import MaidianEvents
import MaidianPipeline

/// Adds the preset properties that come from the upload itself (SPEC section 2): `$ip` from header `ip`,
/// `$receive_time` from header `received_at`, `$project` from the event's `project`, else header `project`,
/// else the default. Never overwrites a property the client sent.
public final class RecordPresetsStage: Stage {
    public struct Config: Decodable, Sendable {
        /// Project name when neither the event nor the record names one.
        public var defaultProject: String = "default"
        enum CodingKeys: String, CodingKey { case defaultProject = "default_project" }
        public init() {}
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            defaultProject = try c.decodeIfPresent(String.self, forKey: .defaultProject) ?? "default"
        }
    }

    public static let kind = "record_presets"
    public static let summary = "adds $ip, $receive_time and $project from the upload's headers"

    let defaultProject: [UInt8]
    /// Where `touchHeaders` leaves what it read (a store keeps the loads from being optimized away).
    private var touchSink: UInt8 = 0

    public init(config: Config, context: StageContext) throws {
        var out: [UInt8] = []
        JSONOut.appendString(config.defaultProject, to: &out)
        self.defaultProject = out
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        touchHeaders(batch)
        let n = batch.events.count
        // All events of a record share its headers: serialize them once per record, then link per event.
        var lastRecord: Int32 = -1
        var ipSpan = Span.absent, rtSpan = Span.absent, projectSpan = Span.absent
        for i in 0..<n {
            let ev = batch.events[i]
            guard ev.status == .live, ev.type.isTrack else { continue }
            if ev.record != lastRecord {
                lastRecord = ev.record
                let rec = batch.records[Int(ev.record)]
                ipSpan = .absent; rtSpan = .absent; projectSpan = .absent
                if rec.ip.isPresent && rec.ip.count > 0 { ipSpan = batch.fragment("$ip", quotedInput: rec.ip) }
                if rec.hasReceivedAt { rtSpan = batch.fragment("$receive_time", integer: rec.receivedAt) }
                projectSpan = rec.project.isPresent
                    ? batch.fragment("$project", quotedInput: rec.project)
                    : batch.fragment("$project", json: defaultProject)
            }
            let known = ev.known
            if ipSpan.isPresent && (known & KnownProperty.ip.bit == 0 || !batch.hasProperty(event: i, .ip)) {
                batch.linkAdded(event: i, ipSpan)
            }
            if rtSpan.isPresent && (known & KnownProperty.receiveTime.bit == 0 || !batch.hasProperty(event: i, .receiveTime)) {
                batch.linkAdded(event: i, rtSpan)
            }
            if known & KnownProperty.project.bit == 0 || !batch.hasProperty(event: i, .project) {
                if ev.project.isPresent {
                    // Rare: the event names its own project. Its raw string content is valid JSON already.
                    let value = batch.json[Int(ev.project.start)..<Int(ev.project.end)]
                    batch.addProperty(event: i, name: "$project") { out in
                        out.append(0x22)
                        out.append(contentsOf: value)
                        out.append(0x22)
                    }
                } else {
                    batch.linkAdded(event: i, projectSpan)
                }
            }
        }
    }

    /// The header values were copied into the input arena before decoding and are out of the cache by now.
    /// Reading a byte of each record's headers first, in a loop whose loads do not wait on each other,
    /// overlaps those misses instead of taking them one record at a time below.
    private func touchHeaders(_ batch: borrowing EventBatch) {
        var touched: UInt8 = 0
        batch.input.withUnsafeBufferPointer { inp in
            batch.records.withUnsafeBufferPointer { recs in
                for r in recs.indices where recs[r].ip.count > 0 {
                    touched ^= inp[Int(recs[r].ip.start)]
                }
            }
        }
        touchSink = touched
    }
}
