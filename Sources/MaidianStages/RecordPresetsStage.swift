import MaidianEvents
import MaidianPipeline

/// Adds the preset properties that come from the upload itself (wire format §2): `$ip` from header `ip`,
/// `$receive_time` from header `received_at`, `$project` from the event's `project`, else header `project`,
/// else the default. Never overwrites a property the client sent.
public final class RecordPresetsStage: Stage {
    /// The stage's options: `default_project`.
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let defaultProject = Setting("default_project", default: "default",
                "`$project` when neither the event nor the record names one", example: "shop")
        }
        public static let settings = ConfigSpec(Settings.defaultProject)
        /// Project name when neither the event nor the record names one.
        public var defaultProject = Settings.defaultProject.default
        /// The default project name, `default`.
        public init() {}
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            defaultProject = try s(Settings.defaultProject)
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
        let n = batch.eventCount
        // All events of a record share its headers: serialize them once per record, then link per event.
        // The fragments sit next to each other, comma-separated, so an event that takes all of them (nearly
        // every event) links them as one.
        var lastRecord: Int32 = -1
        var ipSpan = Span.absent, rtSpan = Span.absent, projectSpan = Span.absent, allSpan = Span.absent
        for i in 0..<n {
            let ev = batch.event(i)
            guard ev.status == .live, ev.type.isTrack else { continue }
            if ev.record != lastRecord {
                lastRecord = ev.record
                let rec = batch.record(Int(ev.record))
                let start = batch.scratchEnd
                ipSpan = .absent; rtSpan = .absent
                if rec.ip.isPresent && rec.ip.count > 0 {
                    ipSpan = batch.fragment("$ip", quotedInput: rec.ip)
                    batch.appendScratch(0x2C)
                }
                if rec.hasReceivedAt {
                    rtSpan = batch.fragment("$receive_time", integer: rec.receivedAt)
                    batch.appendScratch(0x2C)
                }
                if rec.project.isPresent {
                    projectSpan = batch.fragment("$project", quotedInput: rec.project)
                } else {
                    projectSpan = batch.fragment("$project", json: defaultProject)
                }
                allSpan = Span(start: Int32(start), end: projectSpan.end)
            }
            let known = ev.known
            let ip = ipSpan.isPresent && (known & KnownProperty.ip.bit == 0 || !batch.hasProperty(event: i, .ip))
            let rt = rtSpan.isPresent && (known & KnownProperty.receiveTime.bit == 0 || !batch.hasProperty(event: i, .receiveTime))
            let project = known & KnownProperty.project.bit == 0 || !batch.hasProperty(event: i, .project)
            if ip == ipSpan.isPresent && rt == rtSpan.isPresent && project && !ev.project.isPresent {
                batch.linkAdded(event: i, allSpan)
                continue
            }
            if ip { batch.linkAdded(event: i, ipSpan) }
            if rt { batch.linkAdded(event: i, rtSpan) }
            if project {
                if ev.project.isPresent {
                    // Rare: the event names its own project. Its raw string content is valid JSON already.
                    batch.linkAdded(event: i, batch.fragment("$project", jsonStringContent: ev.project))
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
        batch.withInput { input in
            for r in 0..<batch.recordCount {
                let ip = batch.record(r).ip
                if ip.count > 0 { touched ^= input[Int(ip.start)] }
            }
        }
        touchSink = touched
    }
}
