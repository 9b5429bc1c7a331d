import MaidianEvents
import MaidianPipeline

/// Corrects events from devices whose clock is wrong (wire format §2, time calibration): when
/// `|received_at - _flush_time|` exceeds `max_skew`, the event time moves by that difference and the client's
/// original time is kept in `$client_time`.
public final class CalibrateTimeStage: Stage {
    public struct Config: Decodable, Sendable {
        /// Largest tolerated difference between the collector's and the client's clock.
        public var maxSkew: ConfigDuration = ConfigDuration(milliseconds: 60_000)
        enum CodingKeys: String, CodingKey { case maxSkew = "max_skew" }
        public init() {}
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            maxSkew = try c.decodeIfPresent(ConfigDuration.self, forKey: .maxSkew) ?? ConfigDuration(milliseconds: 60_000)
        }
    }

    public static let kind = "calibrate_time"
    public static let summary = "moves events of devices with wrong clocks to collector time, keeping $client_time"

    let maxSkew: Int64
    /// Reused per batch: events to calibrate and by how much.
    private var skewed: [(Int, Int64)] = []
    let calibrated: StageCounter

    public init(config: Config, context: StageContext) throws {
        self.maxSkew = config.maxSkew.milliseconds
        self.calibrated = context.counter("calibrated")
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        // One read-only pass finds the (few) events with a wrong clock; then they are changed.
        skewed.removeAll(keepingCapacity: true)
        let maxSkew = self.maxSkew
        batch.events.withUnsafeBufferPointer { evs in
            batch.records.withUnsafeBufferPointer { recs in
                for i in evs.indices where evs[i].status == .live && evs[i].type.isTrack && evs[i].hasFlushTime {
                    let rec = Int(evs[i].record)
                    guard recs[rec].hasReceivedAt else { continue }
                    let skew = recs[rec].receivedAt &- evs[i].flushTime
                    if skew > maxSkew || skew < -maxSkew { skewed.append((i, skew)) }
                }
            }
        }
        for (i, skew) in skewed {
            let ev = batch.events[i]
            batch.events[i].time = ev.time &+ skew
            batch.events[i].calibrated = true
            calibrated.add()
            if !batch.hasProperty(event: i, .clientTime) {
                let original = ev.clientTime
                batch.addProperty(event: i, name: "$client_time") { JSONOut.appendInt(original, to: &$0) }
            }
        }
    }
}
