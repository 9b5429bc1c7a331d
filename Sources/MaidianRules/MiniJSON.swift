import MaidianEvents

/// A thin adapter over `JSONMembers` (the project's JSON scanner) for the users in MaidianStages that still
/// call it by this name (`MatchStage`, `RulesComparison`, `RulesDoctorRun`, `RulesTestRun`); MaidianRules
/// itself reads JSON through `JSONMembers`. No parsing of its own: remove it once those files move.
public enum MiniJSON {
    /// `s` as a JSON string literal, quotes included (`JSONOut.quoted`).
    public static func quoted(_ s: String) -> String { JSONOut.quoted(s) }

    /// One member: key (decoded) and the value's byte range in the buffer (quotes included).
    public struct Member: Sendable {
        /// The decoded key.
        public var key: [UInt8]
        /// The value's bytes.
        public var value: Range<Int>
        /// The value's first byte (`"`, `{`, `[`, digit, `t`, `f`, `n`).
        public var first: UInt8
    }

    /// The members of the object at `b`; empty if it is not an object.
    public static func members(_ b: UnsafeRawBufferPointer) -> [Member] {
        var out: [Member] = []
        JSONMembers.forEach(in: b) { key, escaped, value in
            out.append(Member(key: escaped ? unescapeJSONString(key) : Array(key), value: value, first: b[value.lowerBound]))
            return true
        }
        return out
    }

    /// Depth-first search for `key` (decoded UTF-8) in the object at `b`: a member of the object itself first,
    /// else inside its object values in order.
    public static func findDepthFirst(_ key: UnsafeRawBufferPointer, in b: UnsafeRawBufferPointer) -> Range<Int>? {
        if let r = JSONMembers.member(key, in: b) { return r }
        var found: Range<Int>?
        JSONMembers.forEach(in: b) { _, _, value in
            guard b[value.lowerBound] == 0x7B else { return true }
            if let r = findDepthFirst(key, in: UnsafeRawBufferPointer(rebasing: b[value])) {
                found = (r.lowerBound + value.lowerBound)..<(r.upperBound + value.lowerBound)
                return false
            }
            return true
        }
        return found
    }

    /// The value range of the first member of the object at `b` whose decoded key is `key` (`JSONMembers.member`).
    public static func member(_ key: UnsafeRawBufferPointer, in b: UnsafeRawBufferPointer) -> Range<Int>? {
        JSONMembers.member(key, in: b)
    }

    /// The decoded text of a JSON string value's bytes (with quotes); nil if not a string (`JSONMembers.string`).
    public static func string(_ b: UnsafeRawBufferPointer) -> String? { JSONMembers.string(b) }
}
