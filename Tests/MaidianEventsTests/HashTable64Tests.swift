import XCTest
@testable import MaidianEvents

final class HashTable64Tests: XCTestCase {
    /// Random operations against a Dictionary (warming reads among them): through growth, removal of
    /// everything, and keys whose tags (top bits) or home slots (low bits) coincide.
    func testMatchesDictionary() {
        var table = HashTable64(capacity: 4)
        var reference: [UInt64: Int64] = [:]
        var state: UInt64 = 12345
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state
        }
        for round in 0..<20_000 {
            let r = next()
            var key = r % 3000 &* 0x9E37_79B9_7F4A_7C15
            switch r % 5 {
            case 0: key &= 0xFE00_0000_0000_0000 | 0xFF  // same tag bits, few home slots
            case 1: key = r % 7  // small keys, 0 included
            default: break
            }
            let value = Int64(bitPattern: next())
            switch next() % 4 {
            case 3:
                // A warming read (`touch`) of present and absent keys changes nothing.
                _ = table.touch(key)
                _ = table.touch(next())
                XCTAssertEqual(table.get(key), reference[key])
            case 0:
                XCTAssertEqual(table.getOrInsert(key, value), reference[key])
                if reference[key] == nil { reference[key] = value }
            case 1:
                table.set(key, value)
                reference[key] = value
            default:
                XCTAssertEqual(table.get(key), reference[key])
            }
            XCTAssertEqual(table.count, reference.count)
            if round % 7000 == 6999 {
                table.removeAll()
                reference.removeAll()
            }
        }
        for (k, v) in reference { XCTAssertEqual(table.get(k), v) }
    }
}
