import MaidianPipeline

/// The one list of built-in stages. A new stage adds one line here.
public enum BuiltinStages {
    /// A factory for each built-in stage and output, in the order `maidian stages` lists them.
    public static let all: [StageFactory] = [
        StageFactory(ValidateStage.self),
        StageFactory(CalibrateTimeStage.self),
        StageFactory(DedupStage.self),
        StageFactory(RecordPresetsStage.self),
        StageFactory(LocationStage.self),
        StageFactory(DeviceStage.self),
        StageFactory(NoiseFilterStage.self),
        StageFactory(MatchStage.self),
        StageFactory(WindowsStage.self),
        StageFactory(EnrichedOutput.self),
        StageFactory(DeadLetterOutput.self),
    ]

    /// A registry with every built-in stage; custom builds register more on top.
    public static var registry: StageRegistry { StageRegistry(all) }
}
