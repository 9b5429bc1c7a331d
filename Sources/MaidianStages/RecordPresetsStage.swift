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

    public init(config: Config, context: StageContext) throws {
        var out: [UInt8] = []
        JSONOut.appendString(config.defaultProject, to: &out)
        self.defaultProject = out
    }

    public func process(_ batch: EventBatch, output: OutputBuffer) throws {
        let n = batch.events.count
        for i in 0..<n {
            let ev = batch.events[i]
            guard ev.status == .live, ev.type.isTrack else { continue }
            let rec = batch.records[Int(ev.record)]
            if rec.ip.isPresent && rec.ip.count > 0 && !batch.hasProperty(event: i, name: "$ip") {
                batch.addStringProperty(event: i, name: "$ip", fromInput: rec.ip)
            }
            if rec.hasReceivedAt && !batch.hasProperty(event: i, name: "$receive_time") {
                let t = rec.receivedAt
                batch.addProperty(event: i, name: "$receive_time") { JSONOut.appendInt(t, to: &$0) }
            }
            if !batch.hasProperty(event: i, name: "$project") {
                if ev.project.isPresent {
                    let span = ev.project
                    batch.addProperty(event: i, name: "$project") { out in
                        out.append(0x22)
                        out.append(contentsOf: batch.json[Int(span.start)..<Int(span.end)])
                        out.append(0x22)
                    }
                } else if rec.project.isPresent {
                    batch.addStringProperty(event: i, name: "$project", fromInput: rec.project)
                } else {
                    let d = defaultProject
                    batch.addProperty(event: i, name: "$project") { $0.append(contentsOf: d) }
                }
            }
        }
    }
}
