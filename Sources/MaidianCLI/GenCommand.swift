import ArgumentParser
import MaidianRecording
import MaidianTools

/// `maidian gen`: writes a recording of realistic simulated traffic (wire format §6) for demos and
/// benchmarks.
struct GenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gen",
        abstract: "Generate a recording of realistic app traffic (.ndjson, or .ndjson.zst when FILE ends in .zst).",
        discussion: """
            Simulates the sample traffic's shopping app: sessions of page views (both enter/leave styles), \
            clicks on buttons, images, list and collection cells, crashes, killed apps, retried uploads, \
            wrong device clocks, profile updates, and about 1% bad records and events (every dead-letter \
            reason). The same options and seed give byte-identical output.

            Real-world conditions (wire format revision 2), off by default: --offline-share (sessions an \
            offline app uploads 2 min to 3 h late: late events that still count), --too-late-share (sessions \
            uploaded 26 to 48 h late: too late), --future-clock-share (installs with clocks 1 to 400 days \
            ahead and no _flush_time: clamped), --login-share (anonymous sessions with a login during a visit).
            """)

    @Option(help: "Number of simulated app installs.")
    var users: Int

    @Option(help: "Length of the simulated period in minutes.")
    var minutes: Int

    @Option(help: "PRNG seed.")
    var seed: UInt64 = 1

    @Option(help: "Start of the period, ms since the epoch.")
    var start: Int64 = TrafficConfig.defaultStart

    @Option(help: "Output file; compressed with zstd when it ends in .zst.")
    var out: String

    @Option(help: "The project header of every record.")
    var project: String = "shop"

    @Option(help: "Share of users on Android devices (0...1).")
    var androidShare: Double = 0.15

    @Option(help: "Multiplier of the rates of bad records, bad events and properties needing fixes (0 = clean).")
    var faultScale: Double = 1

    @Option(help: "Share of sessions cached offline and uploaded 2 minutes to 3 hours after they ended (0...1).")
    var offlineShare: Double = 0

    @Option(help: "Share of sessions uploaded 26 to 48 hours after they ended, too late to count (0...1).")
    var tooLateShare: Double = 0

    @Option(help: "Share of installs with a clock 1 to 400 days ahead and no _flush_time (0...1).")
    var futureClockShare: Double = 0

    @Option(help: "Share of anonymous users' sessions with a login during a visit (0...1).")
    var loginShare: Double = 0

    func validate() throws {
        for (name, share) in [("--offline-share", offlineShare), ("--too-late-share", tooLateShare),
                              ("--future-clock-share", futureClockShare), ("--login-share", loginShare)] {
            guard (0...1).contains(share) else { throw ValidationError("\(name) must be in 0...1") }
        }
        guard offlineShare + tooLateShare <= 1 else { throw ValidationError("--offline-share and --too-late-share add up to more than 1") }
        guard users > 0 else { throw ValidationError("--users must be positive") }
        guard minutes > 0 else { throw ValidationError("--minutes must be positive") }
        guard (0...1).contains(androidShare) else { throw ValidationError("--android-share must be in 0...1") }
        guard faultScale >= 0 else { throw ValidationError("--fault-scale must not be negative") }
    }

    func run() throws {
        var config = TrafficConfig(
            users: users, minutes: minutes, seed: seed, startMillis: start, project: project,
            androidShare: androidShare, faultScale: faultScale)
        config.offlineShare = offlineShare
        config.tooLateShare = tooLateShare
        config.futureClockShare = futureClockShare
        config.loginShare = loginShare
        let clock = ContinuousClock()
        let began = clock.now
        let summary = try TrafficGenerator.generate(config, to: out)
        let elapsed = clock.now - began
        let s = summary.stats
        let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        print(
            "gen: \(s.records) records (\(s.retriedRecords) retried, \(s.badRecords) bad), \(s.events) events "
                + "(\(s.retriedEvents) in retried records, \(s.badEvents) bad, \(s.fixableEvents) to fix), \(s.sessions) sessions, \(s.crashes) crashes; "
                + "\(GenCommand.megabytes(summary.fileBytes)) MB -> \(summary.path) in \(GenCommand.seconds(ms)) s")
        if offlineShare + tooLateShare + futureClockShare + loginShare > 0 {
            print("gen: conditions: \(s.offlineRecords) offline records, \(s.tooLateRecords) too-late records, "
                  + "\(s.futureClockEvents) events with clocks far ahead, \(s.logins) logins during a visit")
        }
    }

    static func megabytes(_ bytes: Int) -> String {
        let tenths = (bytes + 50_000) / 100_000
        return "\(tenths / 10).\(tenths % 10)"
    }

    static func seconds(_ ms: Int64) -> String {
        let tenths = (ms + 50) / 100
        return "\(tenths / 10).\(tenths % 10)"
    }
}
