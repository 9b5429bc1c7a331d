import XCTest
@testable import MaidianStages

/// `AggregateUsers` keeps up to four users inline, then a `UserSet`: a partial must carry the same bytes as a
/// `UserSet` of the same users would.
final class AggregateUsersTests: XCTestCase {
    private func encoded(_ users: AggregateUsers) -> [UInt8] {
        var out: [UInt8] = []
        users.encode(into: &out)
        return out
    }

    private func encoded(_ users: UserSet) -> [UInt8] {
        var out: [UInt8] = []
        users.encode(into: &out)
        return out
    }

    func testEncodesLikeAUserSetAtEverySize() {
        for n in [0, 1, 2, 3, 4, 5, 6, 9, 1000, 1001, 1500] {
            var inline = AggregateUsers()
            var set = UserSet()
            // Descending hashes with repeats: sorting and duplicate checks both matter.
            for i in 0..<n {
                let h = UInt64(n - i) &* 0x9E37_79B9_7F4A_7C15
                for _ in 0..<(i % 3 == 0 ? 2 : 1) {
                    inline.insert(h)
                    set.insert(h)
                }
            }
            XCTAssertEqual(encoded(inline), encoded(set), "\(n) users")
        }
    }

    func testRepeatedUsersCountOnce() {
        var users = AggregateUsers()
        for _ in 0..<3 {
            for h: UInt64 in [7, 3, 5, 3] { users.insert(h) }
        }
        // version-free users part: exact flag, count, then the sorted hashes.
        var want: [UInt8] = [0]
        want.appendLE(Int32(3))
        for h: UInt64 in [3, 5, 7] { want.appendLE(h) }
        XCTAssertEqual(encoded(users), want)
    }
}
