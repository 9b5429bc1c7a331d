import Logging
import MaidianPipeline
import MaidianStages

/// An engine for a target's pipeline text, wired as a worker wires it (one internal partition, `sourcePartitions`
/// source partitions), logging only critical lines. A pipeline that does not load is the target's bug: it stops.
public func makeFuzzEngine(pipeline: String, file: String, sourcePartitions: Int32) -> PipelineEngine {
    do {
        let spec = try PipelineSpec.parse(yaml: pipeline, file: file)
        var logger = Logger(label: "fuzz")
        logger.logLevel = .critical
        let engine = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: logger)
        engine.repartitioning?.connect(partialsTopic: "fuzz.partials", partialsPartitions: 1, sourcePartitions: sourcePartitions)
        return engine
    } catch {
        fatalError("the fuzz pipeline does not load: \(error)")
    }
}
