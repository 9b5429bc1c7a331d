import MaidianEvents
import XCTest

/// `StableHash` values are shared between workers (the internal partition of a windowed key) and versions: they
/// must be FNV-1a's, byte for byte.
final class StableHashTests: XCTestCase {
    func testKnownFNV1aValues() {
        // The published FNV-1a 64-bit test vectors.
        let vectors: [(String, UInt64)] = [
            ("", 0xCBF2_9CE4_8422_2325), ("a", 0xAF63_DC4C_8601_EC8C), ("foobar", 0x8594_4171_F739_67E8),
        ]
        for (text, want) in vectors {
            XCTAssertEqual(Array(text.utf8).withByteView { StableHash.fnv1a($0) }, want, text)
            XCTAssertEqual(StableHash.fnv1a(Array(text.utf8)), want, text)
            XCTAssertEqual(StableHash.fnv1a(text.utf8), want, text)
        }
    }

    func testLowercasingHashesOnlyASCIILettersAlike() {
        func lowered(_ s: String) -> UInt64 { Array(s.utf8).withByteView { StableHash.fnv1a($0, lowercasingASCII: true) } }
        XCTAssertEqual(lowered("SM-G9910 Galaxy"), StableHash.fnv1a("sm-g9910 galaxy".utf8))
        XCTAssertEqual(lowered("@[\\]^_`{"), StableHash.fnv1a("@[\\]^_`{".utf8), "no byte around the letters changes")
        XCTAssertEqual(lowered("ÄÖ"), StableHash.fnv1a("ÄÖ".utf8), "non-ASCII bytes are hashed as they are")
        XCTAssertNotEqual(lowered("A"), Array("A".utf8).withByteView { StableHash.fnv1a($0) })
    }
}
