import ArgumentParser
import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianRecording
import MaidianRules
import MaidianRuntime
import MaidianStages
import MaidianTools

/// `maidian bench-match --rules 10,1000,10000 [--recording FILE] [--runs N] [--json]`: the match stage alone.
struct BenchMatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-match",
        abstract: "Time the match stage alone over a decoded recording, with rules sets generated from its events.",
        discussion: """
            The recording is decoded and run through the stages before `match` (validate, calibrate_time, dedup, \
            or those of --pipeline) first, untimed. Rules sets of each size are generated deterministically from \
            the events (every rule kind, ~10% identifier_regex, some app_versions; up to 30% of them match). Then \
            the match stage runs over copies of the decoded batches, on this thread; only its process calls are \
            timed, in CPU time of the thread. The best of --runs is reported.
            """)

    @Option(help: "Rules set sizes, comma-separated.") var rules: String = "10,1000,10000"
    @Option(help: "Recording (.ndjson or .ndjson.zst; format: docs/wire-format.md §6); scripts/bench-recording.sh generates one.") var recording: String
    @Option(help: "Timed passes over all batches per rules set; the fastest is reported.") var runs: Int = 5
    @Option(help: "Records per batch.") var batch: Int = 1000
    @Option(help: "A pipeline whose stages before `match` prepare the batches (default: validate, calibrate_time, dedup).")
    var pipeline: String?
    @Option(help: "Seed of the rules generator.") var seed: UInt64 = 1
    @Option(help: "Percentage of generated rules with a `where:` condition (any of, numeric, regex, equality).") var conditions: Int = 0
    @Option(help: "Write each generated rules file into this directory (rules-N.yaml).") var writeRules: String?
    @Flag(help: "Generate near misses only (nothing matches): the cost of looking rules up, without adding properties.")
    var noMatches = false
    @Option(help: "Entries of the cache of regex results by element identifier (0: scan every click).") var regexCache: Int = 4096
    @Option(help: "Entries of the match stage's cache of match results by event facts (0: match every event).") var matchCache: Int = 4096
    @Flag(help: "Print one JSON array.") var json = false
    @OptionGroup var global: GlobalOptions

    static let preparation = """
        name: bench-match
        stages:
          - kind: validate
          - kind: calibrate_time
          - kind: dedup
        """

    struct Figure {
        var rules = 0, regexRules = 0, conditionRules = 0
        var loadSeconds = 0.0
        var events = 0, roleEvents = 0, matchedEvents = 0, addedFragments = 0, hits = 0
        var cpuSeconds = Double.infinity, wallSeconds = 0.0
        var eventsPerCPUSecond: Double { Double(events) / cpuSeconds }
        var json: String {
            "{\"rules\":\(rules),\"regex_rules\":\(regexRules),\"condition_rules\":\(conditionRules),\"load_s\":\(String(format: "%.3f", loadSeconds)),"
                + "\"events\":\(events),\"page_and_click_events\":\(roleEvents),\"matched_events\":\(matchedEvents),\"added_fragments\":\(addedFragments),"
                + "\"cpu_s\":\(String(format: "%.4f", cpuSeconds)),\"wall_s\":\(String(format: "%.4f", wallSeconds)),"
                + "\"events_per_cpu_s\":\(Int(eventsPerCPUSecond))}"
        }
    }

    func run() throws {
        let logger = global.makeLogger("maidian.bench-match")
        let sizes = rules.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !sizes.isEmpty, sizes.allSatisfy({ $0 > 0 }) else { throw ValidationError("--rules: comma-separated positive counts") }

        var spec: PipelineSpec
        do {
            if let pipeline {
                spec = try PipelineSpec.load(path: pipeline)
                if let m = spec.stages.firstIndex(where: { $0.kind == MatchStage.kind }) { spec.stages.removeSubrange(m...) }
            } else {
                spec = try PipelineSpec.parse(yaml: Self.preparation)
            }
            spec.outputs = []
        } catch {
            reportPipelineError(error)
            throw ExitCode(1)
        }
        let engine = try PipelineEngine(spec: spec, registry: stageRegistry, logger: logger, clock: .frozen())
        let loadStart = ContinuousClock.now
        let records = Bench.prepare(try Recording.read(path: recording))
        var batches: [EventBatch] = []
        _ = try Bench.run(engine: engine, records: records, topic: spec.source.topic, batchSize: batch) { b, _ in
            guard b.eventCount > 0 else { return }
            var kept = b
            kept.keepDecodedOnly()
            batches.append(kept)
        }
        var catalog = RuleCatalog()
        var events = 0, roleEvents = 0
        for b in batches {
            events += b.eventCount
            for e in 0..<b.eventCount {
                let (role, facts) = EventFacts.read(b, event: e)
                if role != .other { roleEvents += 1 }
                catalog.observe(role: role, facts: facts)
            }
        }
        let seen = catalog.summary
        logger.info("\(events) events in \(batches.count) batches (\(roleEvents) page views and clicks; \(seen.pages) pages, \(seen.elements) elements, \(seen.actions) action identifiers) prepared in \((ContinuousClock.now - loadStart).rounded)")

        guard (0...100).contains(conditions) else { throw ValidationError("--conditions: a percentage, 0 to 100") }
        let generator = RuleSetGenerator(catalog: catalog, seed: seed, conditions: conditions)
        var figures: [Figure] = []
        for n in sizes {
            let text = generator.yaml(count: n, matching: !noMatches)
            if let dir = writeRules { try text.write(toFile: "\(dir)/rules-\(n).yaml", atomically: true, encoding: .utf8) }
            var figure = Figure()
            let t0 = ContinuousClock.now
            let matcher: RuleMatcher
            do {
                matcher = try RuleMatcher(rules: RulesFile.parse(text, file: "rules-\(n).yaml"), regexCache: regexCache, matchCache: matchCache)
            } catch {
                reportPipelineError(error)
                throw ExitCode(1)
            }
            let d = ContinuousClock.now - t0
            figure.loadSeconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
            figure.rules = matcher.rules.pages.count + matcher.rules.elements.count + matcher.rules.actions.count
            figure.regexRules = matcher.rules.elements.filter { $0.identifierRegex != nil }.count
            figure.conditionRules = matcher.rules.pages.filter { !$0.conditions.isEmpty }.count
                + matcher.rules.elements.filter { !$0.conditions.isEmpty }.count + matcher.rules.actions.filter { !$0.conditions.isEmpty }.count
            figure.events = events
            figure.roleEvents = roleEvents
            let context = StageContext(logger: logger, baseDirectory: "", position: "0")
            let stage = MatchStage(matcher: matcher, context: context)
            var output = OutputBuffer()
            // Warm-up pass (untimed): the stage's reused buffers reach their size; count what matched.
            for b in batches {
                var work = b
                try stage.process(&work, output: &output)
                figure.addedFragments += work.addedPropertyCount - b.addedPropertyCount
                // Rules matched, summed over events: what publishing and conditions cost scales with.
                figure.hits += work.matchHitCount - b.matchHitCount
            }
            figure.matchedEvents = context.counters.first { $0.name == "matched" }?.value ?? 0
            for _ in 0..<max(runs, 1) {
                var cpu = 0.0, wall = 0.0
                for b in batches {
                    var work = b
                    // Copies made and room reserved outside the timed region, as in a worker's reused batch.
                    work.reserveRoom(events: b.eventCount, added: b.addedPropertyCount + 4 * b.eventCount, scratchBytes: 256 * b.eventCount)
                    output.reset()
                    let w0 = ContinuousClock.now
                    let c0 = threadCPUSeconds()
                    try stage.process(&work, output: &output)
                    cpu += threadCPUSeconds() - c0
                    let w = ContinuousClock.now - w0
                    wall += Double(w.components.seconds) + Double(w.components.attoseconds) / 1e18
                }
                if cpu < figure.cpuSeconds { figure.cpuSeconds = cpu; figure.wallSeconds = wall }
            }
            figures.append(figure)
            if !json {
                print(String(format: "%6d rules (%4d regex, %4d where): %9.0f events/s per core (CPU %.3f s, wall %.3f s for %d events); "
                             + "matched %d of %d page views and clicks (%.1f%%; %d rules matched in all), %d fragments of properties added; load %.2f s",
                             figure.rules, figure.regexRules, figure.conditionRules, figure.eventsPerCPUSecond, figure.cpuSeconds, figure.wallSeconds,
                             figure.events, figure.matchedEvents, figure.roleEvents,
                             100 * Double(figure.matchedEvents) / Double(max(figure.roleEvents, 1)), figure.hits, figure.addedFragments, figure.loadSeconds))
            }
        }
        if json { print("[" + figures.map(\.json).joined(separator: ",") + "]") }
    }
}

/// CPU time of the calling thread, seconds.
private func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
