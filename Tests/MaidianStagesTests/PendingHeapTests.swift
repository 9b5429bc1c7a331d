import XCTest
@testable import MaidianStages

/// The windows stage's queue of events waiting for the watermark: events come out by (time, arrival), whole,
/// whatever the pushes and pops in between (slots are reused).
final class PendingHeapTests: XCTestCase {
    /// A small seeded generator (the same sequence on every run).
    struct LCG {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    func event(time: Int64, seq: Int64) -> PendingEvent {
        // Every field derived from the order key, so a payload that came out of the wrong slot is seen.
        let n = Int32(truncatingIfNeeded: seq)
        return PendingEvent(time: time, seq: seq, user: n, idStart: UInt32(bitPattern: n &* 3), role: Role(rawValue: UInt8(seq % 6))!,
                            page: n &+ 1, element: n &+ 2, event: n &+ 3, rules: n &+ 4, dims: n &+ 5, appVersion: n &+ 6, arrivalLag: n &+ 7)
    }

    func assertWhole(_ e: PendingEvent, _ expected: (time: Int64, seq: Int64), file: StaticString = #filePath, line: UInt = #line) {
        let want = event(time: expected.time, seq: expected.seq)
        XCTAssertEqual(e.time, want.time, file: file, line: line)
        XCTAssertEqual(e.seq, want.seq, file: file, line: line)
        XCTAssertEqual([e.user, Int32(bitPattern: e.idStart), e.page, e.element, e.event, e.rules, e.dims, e.appVersion],
                       [want.user, Int32(bitPattern: want.idStart), want.page, want.element, want.event, want.rules, want.dims, want.appVersion],
                       file: file, line: line)
        XCTAssertEqual(e.role, want.role, file: file, line: line)
    }

    func testRandomPushesAndPopsComeOutByTimeThenArrival() {
        for seed in 1...20 as ClosedRange<UInt64> {
            var rng = LCG(state: seed)
            var heap = PendingHeap()
            var reference: [(time: Int64, seq: Int64)] = []
            var seq: Int64 = 0
            var out: [PendingEvent] = []
            for _ in 0..<2_000 {
                switch rng.next(10) {
                case 0..<6:
                    // Few distinct times, so ties are broken by arrival.
                    let time = Int64(rng.next(50))
                    seq += 1 + Int64(rng.next(3))
                    heap.push(event(time: time, seq: seq))
                    reference.append((time, seq))
                case 6..<9:
                    reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.seq < $1.seq) }
                    XCTAssertEqual(heap.topTime, reference.first?.time)
                    if let e = heap.pop() { assertWhole(e, reference.removeFirst()) } else { XCTAssertTrue(reference.isEmpty) }
                default:
                    let upTo = Int64(rng.next(60)) - 5
                    reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.seq < $1.seq) }
                    out.removeAll()
                    heap.pop(upTo: upTo, into: &out)
                    let expected = reference.prefix { $0.time <= upTo }
                    XCTAssertEqual(out.count, expected.count, "seed \(seed)")
                    for (e, x) in zip(out, expected) { assertWhole(e, x) }
                    reference.removeFirst(expected.count)
                }
                XCTAssertEqual(heap.count, reference.count)
            }
            reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.seq < $1.seq) }
            for x in reference { assertWhole(heap.pop()!, x) }
            XCTAssertNil(heap.pop())
            XCTAssertTrue(heap.isEmpty)
        }
    }

    func testUpdateChangesEveryQueuedEventAndNoneThatLeft() {
        var heap = PendingHeap()
        for k in 0..<10 { heap.push(event(time: Int64(10 - k), seq: Int64(k))) }
        _ = heap.pop()
        _ = heap.pop()
        // Two slots are free; a new event takes one of them.
        heap.push(event(time: 100, seq: 50))
        var seen: [Int64] = []
        heap.update { seen.append($0.seq); $0.idStart = 7 }
        XCTAssertEqual(seen.sorted(), [0, 1, 2, 3, 4, 5, 6, 7, 50])
        var left: [PendingEvent] = []
        heap.pop(upTo: .max, into: &left)
        XCTAssertEqual(left.map(\.seq), [7, 6, 5, 4, 3, 2, 1, 0, 50])
        XCTAssertTrue(left.allSatisfy { $0.idStart == 7 })
    }

    /// The arrival lag lives in what was padding: an event in the heap and a trail entry (20 per install, most
    /// of an install's state) keep their sizes (bench/README.md, state per open visit).
    func testEventAndTrailEntryKeepTheirSizes() {
        XCTAssertEqual(MemoryLayout<PendingEvent>.stride, 56)
        XCTAssertEqual(MemoryLayout<TrailEntry>.stride, 24)
    }
}
