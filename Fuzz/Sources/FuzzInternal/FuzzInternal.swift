import FuzzSupport
import MaidianEvents
import MaidianPipeline

/// Records of the internal topic (partials, progress, bundles of them) through the merger of the windows
/// stage, as a worker hands it what it polled, sometimes restored from a replay point inside a bundle first.
/// Only Maidian writes that topic, but a merger must skip what it cannot read, never crash or hang on it.
///
/// Input layout: a flags byte (bit 0: restore internal partition 0 first, from the point the next byte's item
/// names, and read the first record as re-read), an item byte, then records as a 2-byte little-endian length
/// and that many bytes, all on internal partition 0 at consecutive offsets.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzInternal(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzInternalState.shared.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

final class FuzzInternalState: @unchecked Sendable {
    nonisolated(unsafe) static let shared = FuzzInternalState()

    static let root = repositoryRoot

    static let pipeline = """
        name: fuzz
        source:
          brokers: embedded
          topic: events.raw
          group: fuzz
        stages:
          - kind: validate
          - kind: match
            rules: \(root)/testdata/traffic/rules-sample.yaml
            reload: false
          - kind: windows
            window: 60s
            allowed_lateness: 5m
            by: [app_version]
        outputs:
          - kind: dead_letter
            topic: events.dlq
        """

    var engine: PipelineEngine
    var output = OutputBuffer()
    var runs = 0

    init() { engine = FuzzInternalState.makeEngine() }

    static func makeEngine() -> PipelineEngine {
        makeFuzzEngine(pipeline: pipeline, file: "fuzz-internal.yaml", sourcePartitions: 2)
    }

    func run(_ input: UnsafeRawBufferPointer) {
        // A fresh engine now and then: the merger's state stays as small as a worker's.
        runs += 1
        if runs % 2000 == 0 { engine = FuzzInternalState.makeEngine() }
        guard input.count >= 2, let merger = engine.repartitioning?.merger else { return }
        let restore = input[0] & 1 == 1
        if restore {
            merger.restore(partition: 0, from: ReplayPoint(offset: 0, maxEventTime: nil, item: Int32(input[1])))
        } else {
            merger.partitionsRevoked([0])
        }
        var records: [InternalRecord] = []
        var at = 2
        while at + 2 <= input.count && records.count < 64 {
            let n = Int(input[at]) | Int(input[at + 1]) << 8
            at += 2
            guard at + n <= input.count else { break }
            records.append(InternalRecord(partition: 0, offset: Int64(records.count), key: [], value: Array(input[at..<(at + n)]),
                                          index: Int32(records.count), replay: restore && records.isEmpty))
            at += n
        }
        output.reset()
        do {
            try merger.process(records, output: &output)
        } catch {
            fatalError("internal records stopped the merger: \(error)")
        }
        _ = merger.replayFrom(partition: 0)
        _ = merger.isComplete(partition: 0)
    }
}

/// The entry point SwiftPM links (see `fuzzerMain`).
@_cdecl("FuzzInternal_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    fuzzerMain(argc, argv, fuzzInternal)
}
