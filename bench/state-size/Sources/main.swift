// Heap bytes the windows stage keeps per active user with open page visits (issue 5 budget: at most 300
// bytes per open visit). Builds one partition's state from N users' page-enter uploads and compares glibc's
// in-use heap (mallinfo2) before and after. Use a release build:
//   swift build -c release --product maidian-state-size
//   .build/release/maidian-state-size --users 1000000 --visits 1 [--id-bytes 36]
import CHeapStats
import Logging
import MaidianEvents
import MaidianPipeline
import MaidianStages

var users = 1_000_000
var visits = 1
var batchSize = 10_000
var idBytes = 17
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    guard let v = args.popFirst().flatMap({ Int($0) }), v > 0 else { fatalError("usage: maidian-state-size [--users N] [--visits V] [--batch B] [--id-bytes L]") }
    switch a {
    case "--users": users = v
    case "--visits": visits = v
    case "--batch": batchSize = v
    case "--id-bytes": idBytes = max(9, v)
    default: fatalError("unknown option \(a)")
    }
}
precondition(users > 2 * batchSize, "use more users than two batches")

/// Builds the state and prints the figures (locals: top-level variables would be main-actor state).
func measure(users: Int, visits: Int, batchSize: Int, idBytes: Int) throws {
    let context = StageContext(logger: Logger(label: "state-size"), baseDirectory: "", position: "0")
    let validate = try ValidateStage(config: .init(), context: context)
    let stage = try WindowsStage(config: .init(), context: context)
    stage.connect(partialsTopic: "maidian.partials", partialsPartitions: 1, sourcePartitions: 1)
    let decoder = RecordDecoder(limits: RecordLimits())
    var batch = EventBatch()
    var output = OutputBuffer()
    let t0: Int64 = 1_763_700_000_000
    let pages = (0..<visits).map { "Page\($0)ViewController" }

    /// A distinct_id like the sample's install ids (17 bytes), or padded to `idBytes` (a UUID is 36).
    func userID(_ u: Int) -> String {
        let hex = String(u, radix: 16)
        let id = "a" + String(repeating: "0", count: 7 - min(7, hex.count)) + hex + "-0bd0b8ab"
        return id + String(repeating: "f", count: max(0, idBytes - id.utf8.count))
    }

    /// One upload per user (its page enters at 1 ms per user, well inside the visit timeout), as one batch.
    func run(_ range: Range<Int>, time: (Int) -> Int64) throws {
        batch.reset()
        output.reset()
        let topic = batch.topicIndex("events.raw")
        for u in range {
            let id = userID(u)
            var json = "["
            for (k, page) in pages.enumerated() {
                if k > 0 { json += "," }
                json += "{\"type\":\"track\",\"event\":\"$AppViewScreen\",\"time\":\(time(u) + Int64(k)),\"distinct_id\":\"\(id)\","
                json += "\"properties\":{\"$screen_name\":\"\(page)\",\"$app_version\":\"3.2.1\"}}"
            }
            json += "]"
            Array(json.utf8).withUnsafeBytes { v in
                batch.appendRecord(topic: topic, partition: 0, offset: Int64(u), timestamp: 0, key: nil, value: v,
                                   ip: nil, receivedAt: nil, ua: nil, project: nil)
            }
        }
        decoder.decodeAll(&batch)
        try validate.process(&batch, output: &output)
        try stage.process(&batch, output: &output)
    }

    // The first batch sizes the reused buffers; measure from after it.
    try run(0..<batchSize) { t0 + Int64($0) }
    let before = maidian_heap_in_use()
    for start in stride(from: batchSize, to: users, by: batchSize) {
        try run(start..<min(start + batchSize, users)) { t0 + Int64($0) }
    }
    // A later event moves the watermark past every enter: nothing is left pending, every visit is open.
    try run(users..<(users + 1)) { _ in t0 + Int64(users) + 31_000 }
    let after = maidian_heap_in_use()
    let (tracked, open) = stage.stateSize
    let measured = users + 1 - batchSize
    let bytes = Double(Int(after) - Int(before))
    print("users \(tracked), open visits \(open), distinct_id \(userID(0).utf8.count) bytes, heap +\(Int(bytes)) bytes for \(measured) users")
    print("bytes per active user (\(visits) open visit\(visits == 1 ? "" : "s") each): \(Int((bytes / Double(measured)).rounded()))")
    print("bytes per open visit: \(Int((bytes / Double(measured * visits)).rounded()))")
}

try measure(users: users, visits: visits, batchSize: batchSize, idBytes: idBytes)
