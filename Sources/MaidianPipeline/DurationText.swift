extension Duration {
    /// The duration as people read it in logs and summaries, rounded to what matters: `850 µs`, `9.3 ms`,
    /// `1.25 s`, `2m05s` (a `Duration`'s own description prints every nanosecond: `0.009296396 seconds`).
    public var rounded: String {
        let (s, atto) = components
        let ns = s * 1_000_000_000 + atto / 1_000_000_000
        if ns < 0 { return "-" + (Duration.zero - self).rounded }
        // Each unit while the rounded value stays below the next unit (999.96 ms is "1.00 s").
        if ns < 999_500 { return "\((ns + 500) / 1000) µs" }
        let tenths = (ns + 50_000) / 100_000
        if tenths < 10_000 { return "\(tenths / 10).\(tenths % 10) ms" }
        let hundredths = (ns + 5_000_000) / 10_000_000
        if hundredths < 6_000 {
            let frac = hundredths % 100
            return "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac) s"
        }
        let total = (ns + 500_000_000) / 1_000_000_000
        let sec = total % 60
        return "\(total / 60)m\(sec < 10 ? "0" : "")\(sec)s"
    }
}
