import ArgumentParser
import Foundation
import Logging
import MaidianPipeline
import MaidianRecording
import MaidianRuntime
import MaidianTools

/// `maidian bench PIPELINE.yaml --recording FILE [--json]`.
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Run a pipeline's stages over a recording from memory, on one thread, and report the speed.")

    @Argument(help: "The pipeline YAML file.") var pipeline: String
    @Option(help: "Recording (.ndjson or .ndjson.zst; format: docs/wire-format.md §6).") var recording: String
    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: "Records per batch (default: the pipeline's source.max_batch, as a worker polls).") var batch: Int?
    @Option(help: "Partitions to spread the records over (by key).") var partitions: Int = 8
    @Option(help: "Partitions of the internal topic the partial counts go through (default: as many as --partitions, as `maidian run` creates them on an embedded broker). Each source partition tells every internal partition how far it is, once per window length of event time.")
    var internalPartitions: Int?
    @Option(help: "Runs (each with fresh stage state); the one with the least CPU time is reported.") var runs: Int = 1
    @Flag(help: "Also print a digest of all outputs, from one extra untimed run (to check that a change kept them).") var digest = false
    @Flag(help: "Also run once more measuring the wall time each stage takes (printed with the summary).") var stageTimes = false
    @Flag(help: "Leave out the merge of partial aggregates (a worker holding every internal partition merges them; by default the bench does too).") var noMerge = false
    @Option(help: "Threads that decode (default 1: the figure is one core's; with more, the helpers' CPU time is counted too).") var decodeThreads: Int = 1
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let logger = global.makeLogger("maidian.bench")
        // Processing time stands still: outputs (and the digest) depend on the recording alone, not on how
        // fast this machine runs the stages (a debug build, a loaded machine).
        guard (1...8).contains(decodeThreads) else { throw ValidationError("--decode-threads must be between 1 and 8") }
        guard (1...100_000).contains(partitions) else { throw ValidationError("--partitions must be between 1 and 100000") }
        if let n = internalPartitions, !(1...100_000).contains(n) { throw ValidationError("--internal-partitions must be between 1 and 100000") }
        let internalCount = internalPartitions.map { Int32($0) }
        let (spec, engine) = try loadPipeline(pipeline, logger: logger, clock: .frozen()) { $0.source.decodeThreads = decodeThreads }
        let batch = self.batch ?? spec.source.maxBatch
        let loadStart = ContinuousClock.now
        let records = Bench.prepare(try Recording.read(path: recording), partitions: Int32(partitions))
        logger.info("loaded \(records.count) records in \((ContinuousClock.now - loadStart).rounded)")
        var result = try Bench.run(engine: engine, records: records, topic: spec.source.topic, batchSize: batch, merge: !noMerge, internalPartitions: internalCount)
        var reported = engine
        for _ in 1..<max(runs, 1) {
            let fresh = try PipelineEngine(spec: spec, registry: stageRegistry, logger: logger, clock: .frozen())
            let r = try Bench.run(engine: fresh, records: records, topic: spec.source.topic, batchSize: batch, merge: !noMerge, internalPartitions: internalCount)
            if r.cpuSeconds < result.cpuSeconds { result = r; reported = fresh }
        }
        var mergeTime: Duration?
        if stageTimes {
            // A separate run: the clock reads must not touch the figures above.
            let timed = try PipelineEngine(spec: spec, registry: stageRegistry, logger: logger, clock: .frozen())
            timed.measureTime = true
            let r = try Bench.run(engine: timed, records: records, topic: spec.source.topic, batchSize: batch, merge: !noMerge, internalPartitions: internalCount)
            reported = timed
            mergeTime = r.mergeTime
        }
        let summaryEngine = reported
        if json {
            print(result.json)
        } else {
            print(String(format: "%d events (%d records) in %.3f s: %.0f events/s, %.1f MB/s of JSON, peak RSS %.1f MiB",
                         result.events, result.records, result.seconds, result.eventsPerSecond,
                         result.megabytesPerSecond, Double(result.peakRSSBytes) / 1_048_576))
            print(String(format: "CPU time of the benchmark thread%@ %.3f s: %.0f events per CPU second", decodeThreads > 1 ? " and its decode helpers" : "", result.cpuSeconds, result.eventsPerCPUSecond))
            print("outputs: \(result.outputMessages) messages (\(result.mergedMessages) written by merging partial aggregates), \(result.outputBytes) bytes")
            for line in summaryEngine.summaryLines() { print("  " + line) }
            if !noMerge, let merger = summaryEngine.repartitioning?.merger {
                for c in merger.counters { print("  merge.\(c.name)=\(c.value)") }
                if let mergeTime { print("  merge: time=\(mergeTime)") }
            }
        }
        if digest {
            let fresh = try PipelineEngine(spec: spec, registry: stageRegistry, logger: logger, clock: .frozen())
            let d = try Bench.outputDigest(engine: fresh, records: records, topic: spec.source.topic, batchSize: batch, merge: !noMerge, internalPartitions: internalCount)
            print("output digest: " + String(d, radix: 16))
        }
    }
}
