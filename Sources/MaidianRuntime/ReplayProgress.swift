/// Progress of a replay as a person reads it: done/total, rate and ETA.
public struct ReplayProgress: Sendable {
    /// Records processed so far.
    public var done: Int64
    /// Records the replay will process in all (`ReplayPlan.records`).
    public var total: Int64
    /// Records per second (recently).
    public var rate: Double

    /// Progress of `done` of `total` records at `rate` records per second.
    public init(done: Int64, total: Int64, rate: Double) {
        self.done = done
        self.total = total
        self.rate = rate
    }

    /// Seconds left at the current rate; nil before there is a rate.
    public var etaSeconds: Int? {
        guard rate > 0 else { return nil }
        return Int((Double(max(0, total - done)) / rate).rounded(.up))
    }

    /// Share done, 0 to 1; 1 when there is nothing to do.
    public var fraction: Double { total > 0 ? min(1, Double(done) / Double(total)) : 1 }

    /// `[████████░░░░░░░░]  52%  12,345/23,456 records  3,210 rec/s  ETA 0:03`
    public func bar(width: Int = 24) -> String {
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        return "[\(bar)] \(percent)  \(summary)"
    }

    /// `replay: 12345/23456 records (52%), 3210 records/s, ETA 0:03`
    public var line: String { "replay: \(done)/\(total) records (\(percentText)), \(Int(rate)) records/s, ETA \(eta)" }

    private var percentText: String { "\(Int((fraction * 100).rounded(.down)))%" }

    /// Right-aligned in 4 columns, so the bar's text does not jump.
    private var percent: String { String(repeating: " ", count: max(0, 4 - percentText.count)) + percentText }

    private var summary: String { "\(Self.grouped(done))/\(Self.grouped(total)) records  \(Self.grouped(Int64(rate))) rec/s  ETA \(eta)" }

    private var eta: String {
        guard let s = etaSeconds else { return "-:--" }
        let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60)
        let mmss = "\(m < 10 && h > 0 ? "0" : "")\(m):\(sec < 10 ? "0" : "")\(sec)"
        return h > 0 ? "\(h):\(mmss)" : mmss
    }

    static func grouped(_ n: Int64) -> String {
        let digits = Array(String(n))
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return out
    }
}

/// Records per second since the newest sample that is at least 10 s old (or the oldest one), not counting
/// the wait before the first record (a group join).
public struct RateMeter: Sendable {
    /// A meter without samples (its first rate is 0).
    public init() {}

    private var samples: [(time: ContinuousClock.Instant, done: Int64)] = []

    /// Adds a sample; returns the rate.
    public mutating func add(_ done: Int64, at time: ContinuousClock.Instant) -> Double {
        samples.append((time, done))
        // Keep one sample older than the window as the base; drop samples from before any progress.
        while samples.count > 2 && (time - samples[1].time >= .seconds(10) || samples[1].done == 0) { samples.removeFirst() }
        guard let first = samples.first, done > first.done else { return 0 }
        let span = time - first.time
        let seconds = Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18
        return seconds > 0 ? Double(done - first.done) / seconds : 0
    }
}
