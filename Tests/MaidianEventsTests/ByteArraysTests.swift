import XCTest
import MaidianEvents

/// The byte-array primitives the windows stage uses instead of pointers (`ByteArrays.swift`).
final class ByteArraysTests: XCTestCase {
    /// `precedes` orders as `memcmp` then length does (the order partials are written in), across whole
    /// words, tails, bytes above 0x7F and prefixes.
    func testPrecedesIsMemcmpOrderThenLength() {
        var rng = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = [0x00, 0x41, 0x42, 0x7F, 0x80, 0xFF]
        var samples: [[UInt8]] = [[], [0x41], Array("metric=pv|rule=home|".utf8), Array("metric=pv|rule=home|1".utf8)]
        for _ in 0..<200 {
            let n = Int.random(in: 0...20, using: &rng)
            samples.append((0..<n).map { _ in alphabet.randomElement(using: &rng)! })
        }
        for a in samples {
            for b in samples {
                let expected = a.lexicographicallyPrecedes(b)
                let got = a.withByteView { va in b.withByteView { vb in va.precedes(vb) } }
                XCTAssertEqual(got, expected, "\(a) vs \(b)")
            }
        }
    }

    func testAppendRangeLittleEndianAndEscaped() {
        var out: [UInt8] = [1]
        out.append(bytesOf: [9, 8, 7, 6], 1 ..< 3)
        XCTAssertEqual(out, [1, 8, 7])
        out.removeAll()
        out.appendLittleEndian(UInt64(0x0102_0304_0506_0708))
        out.appendLittleEndian(UInt32(0x0A0B_0C0D))
        XCTAssertEqual(out, [8, 7, 6, 5, 4, 3, 2, 1, 0x0D, 0x0C, 0x0B, 0x0A])
        out.removeAll()
        Array("a\"b\\c\n".utf8).withByteView { $0.appendEscaped(to: &out) }
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "a\\\"b\\\\c\\n")
        var copy: [UInt8] = []
        Array("xyz".utf8).withByteView { copy.append($0[1 ..< 3]) }
        XCTAssertEqual(copy, Array("yz".utf8))
        XCTAssertEqual(Array([3, 1, 2] as [UInt8]).withByteView { Array($0.elements) }, [3, 1, 2])
    }
}
