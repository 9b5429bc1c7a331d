import MaidianEvents
import MaidianPipeline

/// Corrects events from devices whose clock is wrong (wire format §2, time calibration): when
/// `|received_at - _flush_time|` exceeds `max_skew`, the event time moves by that difference; a time still
/// more than `max_future` after its record's `received_at` (else the Kafka record timestamp) becomes that
/// time. Either way the client's original time is kept in `$client_time`.
///
/// Calibration never leaves the wire format's time range (2015-01-01 to 2100-01-01): a correction that would
/// (or whose arithmetic would overflow) moves the event to its record's `received_at` instead, because a
/// difference that large means `_flush_time` itself is garbage while the collector's clock is not.
public final class CalibrateTimeStage: Stage {
    /// The stage's options: `max_skew` and `max_future` (pipelines/README.md documents each).
    public struct Config: Decodable, Sendable, DeclaredSettings {
        enum Settings {
            static let maxSkew = Setting("max_skew", default: ConfigDuration.seconds(60),
                "largest tolerated difference between collector and client clock (a duration)", example: "2m")
            static let maxFuture = Setting("max_future", default: ConfigDuration.minutes(10),
                "how far an event may be ahead of its record's receive time before it is clamped to it (not negative)", example: "1h")
        }
        public static let settings = ConfigSpec(Settings.maxSkew, Settings.maxFuture)
        /// Largest tolerated difference between the collector's and the client's clock.
        public var maxSkew = Settings.maxSkew.default
        /// How far ahead of its receive time an event may be before its clock counts as uncorrectable.
        public var maxFuture = Settings.maxFuture.default
        /// Every setting at its default.
        public init() {}
        public init(from decoder: any Decoder) throws {
            let s = try decoder.settings(Self.settings)
            maxSkew = try s(Settings.maxSkew)
            maxFuture = try s(Settings.maxFuture)
            if maxFuture.milliseconds < 0 { throw PipelineError(code: .badValue, message: "'max_future' must not be negative") }
        }
    }

    public static let kind = "calibrate_time"
    public static let summary = "moves events of devices with wrong clocks to collector time, keeping $client_time"

    let maxSkew: Int64
    let maxFuture: Int64
    /// Reused per batch: events to change and their new time.
    private var changed: [(Int, Int64)] = []
    let calibrated: StageCounter
    let clamped: StageCounter
    let outOfRange: StageCounter

    public init(config: Config, context: StageContext) throws {
        self.maxSkew = config.maxSkew.milliseconds
        self.maxFuture = config.maxFuture.milliseconds
        self.calibrated = context.counter("calibrated")
        self.clamped = context.counter("clamped_future")
        self.outOfRange = context.counter("calibrated_out_of_range")
    }

    /// The event's time after calibration and the clamp, or nil when it stays. Overflow-safe for any inputs.
    @inline(__always)
    static func corrected(time: Int64, flushTime: Int64?, receivedAt: Int64?, timestamp: Int64,
                          maxSkew: Int64, maxFuture: Int64) -> (time: Int64, skewed: Bool, clamped: Bool, outOfRange: Bool)? {
        var t = time
        var skewed = false, outOfRange = false
        if let flushTime, let receivedAt {
            let (skew, o1) = receivedAt.subtractingReportingOverflow(flushTime)
            if o1 || skew > maxSkew || skew < -maxSkew {
                skewed = true
                let (moved, o2) = time.addingReportingOverflow(skew)
                if o1 || o2 || !EventTimeRange.contains(moved) {
                    // `_flush_time` is garbage: the collector's receive time is the best guess left (it is
                    // checked below like any other time); if it is out of range too, the client time stays.
                    outOfRange = true
                    t = EventTimeRange.contains(receivedAt) ? receivedAt : time
                } else {
                    t = moved
                }
            }
        }
        // The clamp: the reference is the collector's receive time, else the Kafka record's timestamp (a
        // missing or nonsensical reference clamps nothing).
        let reference = receivedAt ?? timestamp
        var clamped = false
        if EventTimeRange.contains(reference) {
            let (limit, o) = reference.addingReportingOverflow(maxFuture)
            if !o && t > limit {
                t = reference
                clamped = true
            }
        }
        return skewed || clamped ? (t, skewed, clamped, outOfRange) : nil
    }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        // One read-only pass finds the (few) events with a wrong clock; then they are changed.
        changed.removeAll(keepingCapacity: true)
        let maxSkew = self.maxSkew, maxFuture = self.maxFuture
        for i in 0..<batch.eventCount where batch.isLiveTrack(i) {
            let ev = batch.event(i), rec = batch.record(of: i)
            guard let c = Self.corrected(
                time: ev.time, flushTime: ev.hasFlushTime ? ev.flushTime : nil,
                receivedAt: rec.hasReceivedAt ? rec.receivedAt : nil, timestamp: rec.timestamp,
                maxSkew: maxSkew, maxFuture: maxFuture)
            else { continue }
            if c.skewed { calibrated.add() }
            if c.clamped { clamped.add() }
            if c.outOfRange { outOfRange.add() }
            changed.append((i, c.time))
        }
        for (i, time) in changed {
            batch.setTime(i, time)
            if !batch.hasProperty(event: i, .clientTime) {
                batch.addProperty(event: i, .clientTime, integer: batch.event(i).clientTime)
            }
        }
    }
}
