import FuzzSupport
import MaidianEvents
import MaidianPipeline
import MaidianStages

/// One input record through decoding and every event stage and output of the sample pipeline (validate to
/// windows, with the repository's test rules and geo database), as a worker runs them, batch bound included.
///
/// Input layout: four length bytes (`ip`, `ua`, `project`, `received_at` headers; 255 means absent), the
/// header bytes, then the record value. Shorter inputs are a value without headers.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecord(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzRecordState.shared.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

final class FuzzRecordState: @unchecked Sendable {
    nonisolated(unsafe) static let shared = FuzzRecordState()

    static let root = repositoryRoot

    static let pipeline = """
        name: fuzz
        source:
          brokers: embedded
          topic: events.raw
          group: fuzz
          limits:
            max_batch_bytes: 8MiB
        stages:
          - kind: validate
          - kind: calibrate_time
          - kind: dedup
          - kind: record_presets
          - kind: location
            database: \(root)/testdata/geo/test-city.mmdb
            reload_check: 1h
          - kind: device
          - kind: noise_filter
            rules:
              - name: tab_bar_touch
                actions: ["_buttonDown:", "_buttonUp:"]
                beside: ["_tabBarItemClicked:"]
                within: 1s
                same_target: true
          - kind: match
            rules: \(root)/testdata/traffic/rules-sample.yaml
            reload: false
          - kind: windows
            window: 60s
            by: [app_version]
        outputs:
          - kind: enriched
            topic: events.enriched
          - kind: dead_letter
            topic: events.dlq
        """

    var engine: PipelineEngine
    /// The value decoded alone, and eight copies of it decoded with a helper thread (`source.decode_threads`):
    /// every copy must come out as the value alone does.
    let alone = RecordDecoder(limits: FuzzRecordState.limits, threads: 1)
    let shared = RecordDecoder(limits: FuzzRecordState.limits, threads: 2)
    var single = EventBatch()
    var copies = EventBatch()
    static let limits: RecordLimits = {
        var l = RecordLimits()
        l.maxBatchBytes = 8 << 20
        return l
    }()
    var batch = EventBatch()
    var rest = EventBatch()
    var output = OutputBuffer()
    var runs = 0
    var offset: Int64 = 0

    init() { engine = FuzzRecordState.makeEngine() }

    static func makeEngine() -> PipelineEngine {
        makeFuzzEngine(pipeline: pipeline, file: "fuzz-pipeline.yaml", sourcePartitions: 1)
    }

    func run(_ input: UnsafeRawBufferPointer) {
        // A fresh engine now and then: state (windows, dedup) stays as small as a worker's.
        runs += 1
        if runs % 5000 == 0 { engine = FuzzRecordState.makeEngine() }
        var headers: [UnsafeRawBufferPointer?] = [nil, nil, nil, nil]
        var value = input
        if input.count >= 4 {
            var at = 4
            var ok = true
            for h in 0..<4 where input[h] != 255 {
                let n = Int(input[h])
                guard at + n <= input.count else { ok = false; break }
                headers[h] = UnsafeRawBufferPointer(rebasing: input[at..<(at + n)])
                at += n
            }
            if ok { value = UnsafeRawBufferPointer(rebasing: input[at...]) } else { headers = [nil, nil, nil, nil] }
        }
        batch.reset()
        output.reset()
        let topic = batch.topicIndex("events.raw")
        offset += 1
        batch.appendRecord(
            topic: topic, partition: 0, offset: offset, timestamp: 1_763_700_000_000, key: nil, value: value,
            ip: headers[0], receivedAt: headers[3], ua: headers[1], project: headers[2])
        do {
            try engine.process(&batch, output: &output, rest: &rest)
            while !rest.records.isEmpty {
                batch.reset()
                output.reset()
                rest.moveRecords(from: 0, to: &batch)
                rest.reset()
                try engine.process(&batch, output: &output, rest: &rest)
            }
        } catch {
            fatalError("a record stopped the pipeline: \(error)")
        }
        compareSharedDecoding(value)
        // Every JSON output must be valid UTF-8 (headers and client bytes never break it).
        output.bytes.withUnsafeBytes { b in
            for m in output.messages where output.topics[Int(m.topic)].hasPrefix("events.") {
                let v = UnsafeRawBufferPointer(rebasing: b[Int(m.value.start)..<Int(m.value.end)])
                if !isValidUTF8(v) { fatalError("an output is not valid UTF-8") }
            }
        }
    }
}

extension FuzzRecordState {
    func compareSharedDecoding(_ value: UnsafeRawBufferPointer) {
        // Only zstd values are decompressed by helpers; the others never leave the decoding thread.
        guard ZstdDecompressor.hasMagic(value) else { return }
        single.reset()
        copies.reset()
        let t1 = single.topicIndex("events.raw")
        single.appendRecord(topic: t1, partition: 0, offset: 0, timestamp: 0, key: nil, value: value, ip: nil, receivedAt: nil, ua: nil, project: nil)
        alone.decodeAll(&single)
        let t2 = copies.topicIndex("events.raw")
        for i in 0..<8 {
            copies.appendRecord(topic: t2, partition: 0, offset: Int64(i), timestamp: 0, key: nil, value: value, ip: nil, receivedAt: nil, ua: nil, project: nil)
        }
        let done = shared.decodeAll(&copies)
        let a = single.records[0]
        for r in 0..<done {
            let b = copies.records[r]
            if b.status != a.status || b.reason != a.reason || b.eventCount != a.eventCount
                || copies.jsonString(b.json) != single.jsonString(a.json) {
                fatalError("decoding with a helper thread differs: \(a.status)/\(a.reason)/\(a.eventCount) alone, \(b.status)/\(b.reason)/\(b.eventCount) in copy \(r)")
            }
        }
    }
}

/// The entry point SwiftPM links (see `fuzzerMain`).
@_cdecl("FuzzRecord_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    fuzzerMain(argc, argv, fuzzRecord)
}
