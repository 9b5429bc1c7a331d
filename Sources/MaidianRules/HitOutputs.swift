import MaidianEvents

/// What each hit writes into an event, laid out flat when the rules load, so a match costs byte copies and no
/// per-hit look-ups of rule structs (wire format §4): the rule id as a JSON string (for `$matched_rules`), the
/// metric and grouping key, and the `userDefined` / `pagePara` entries of action rules with their JSON pieces
/// already escaped. Everything a hit reads is in plain arrays of trivial values, indexed by hit.
public struct HitOutputs: Sendable {
    /// Where a `userDefined` or `pagePara` entry's value comes from.
    public enum Source: UInt8, Sendable {
        /// A `userDefined` value: the entry's fragment is the whole `"key":"value"`.
        case constant
        /// `pagePara` by `propertyName` (`containIn: "0"`): that property, else the key depth-first inside the
        /// event's object properties, in order.
        case property
        /// `pagePara` with `containIn: "1"`: the key depth-first inside `$element_content`.
        case content
        /// `pagePara` by `propertyPath` `a/b`: member `b` of object property `a`.
        case path
        /// A `propertyPath` that is not two parts: never has a value.
        case none
    }

    /// One `userDefined` or `pagePara` entry of an action rule, in file order.
    public struct Entry: Sendable {
        /// Where the entry's value comes from.
        public var source: Source
        /// The output name's number (`names`).
        public var name: Int32
        /// `"name":"value"` (`constant`) or `"name":` in `bytes`.
        public var fragmentStart: Int32, fragmentEnd: Int32
        /// The property read (`property`, `path`): its name's number; -1 otherwise.
        public var property: Int32
        /// The key looked for inside objects, in `bytes` (unescaped UTF-8).
        public var keyStart: Int32, keyEnd: Int32
    }

    /// What one hit writes, in one record: the match stage reads all of it per hit, and with thousands of rules
    /// a record per hit is one cache line where an array per field was one each.
    public struct Hit: Sendable {
        /// The id as a JSON string: `bytes[idStart..<idEnd]`.
        public var idStart: Int32, idEnd: Int32
        /// For `group_by_content` element rules: the content item key in `bytes[groupStart..<groupEnd]` (empty:
        /// the string content); `groupStart < 0` for every other rule.
        public var groupStart: Int32, groupEnd: Int32
        /// The hit's entries: `entries[entryStart..<entryEnd]`.
        public var entryStart: Int32, entryEnd: Int32
        /// The count the hit feeds.
        public var metric: MatchMetric

        /// Whether the hit has `userDefined` or `pagePara` entries.
        @inlinable public var hasEntries: Bool { entryStart < entryEnd }
    }

    /// Every byte the tables point into.
    public private(set) var bytes: [UInt8] = []
    /// Per hit number.
    public private(set) var hits: [Hit] = []
    /// Every hit's `userDefined` / `pagePara` entries; a hit's own are `entries[entryStart..<entryEnd]`.
    public private(set) var entries: [Entry] = []
    /// The distinct property names entries write or read (UTF-8, compared with the raw name bytes of an
    /// event's properties): name `n` is `bytes[nameStarts[n]..<nameStarts[n + 1]]`.
    public private(set) var nameStarts: [Int32] = []
    /// The names by length: those of length `c` are `nameOrder[byLength[c]..<byLength[c + 1]]`.
    public private(set) var nameOrder: [Int32] = []
    /// Per name length `c`, where names of that length start in `nameOrder` (`longestName + 2` elements).
    public private(set) var byLength: [Int32] = []
    /// Bit `c` set: some name is `c` bytes long (`c < 64`; longer names set bit 63).
    public private(set) var nameLengths: UInt64 = 0
    /// Per `Property.known` value (256 entries): the number of the name that known property's name is, or -1.
    /// A known property whose name is not escaped is placed by this without reading its name's bytes.
    public private(set) var nameOfKnown: [Int32] = Array(repeating: -1, count: 256)
    /// Some name is a known property's (`nameOfKnown` places it).
    public private(set) var hasKnownNames = false
    /// `nameLengths` of the names that are no known property's. Only those can equal the bytes of a property
    /// name `Property.known` does not place: such a name is not a known one's, or escaped (a backslash, which
    /// no known name has).
    public private(set) var otherNameLengths: UInt64 = 0
    /// Whether any hit has entries.
    public var hasEntries: Bool { !entries.isEmpty }

    /// The number of distinct names.
    public var nameCount: Int { nameStarts.count - 1 }
    /// The longest name (`byLength` has `longestName + 2` elements).
    public var longestName: Int { byLength.count - 2 }

    init(rules: RulesFile) {
        var numbers: [[UInt8]: Int32] = [:]
        var names: [[UInt8]] = []
        func name(_ s: String) -> Int32 {
            let b = Array(s.utf8)
            if let n = numbers[b] { return n }
            numbers[b] = Int32(names.count)
            names.append(b)
            return Int32(names.count - 1)
        }
        func put(_ s: [UInt8]) -> (Int32, Int32) {
            let start = bytes.count
            bytes.append(contentsOf: s)
            return (Int32(start), Int32(bytes.count))
        }

        let metrics: [MatchMetric] = rules.pages.map { _ in .pv } + rules.elements.map { _ in .click }
            + rules.actions.map { $0.kind == .pagePV ? .pv : .click }
        for (h, id) in (rules.pages.map(\.id) + rules.elements.map(\.id) + rules.actions.map(\.id)).enumerated() {
            let start = Int32(bytes.count)
            JSONOut.appendString(id, to: &bytes)
            hits.append(Hit(idStart: start, idEnd: Int32(bytes.count), groupStart: -1, groupEnd: -1, entryStart: 0, entryEnd: 0, metric: metrics[h]))
        }
        for (e, r) in rules.elements.enumerated() where r.groupByContent {
            (hits[rules.pages.count + e].groupStart, hits[rules.pages.count + e].groupEnd) = put(Array((r.contentKey ?? "").utf8))
        }

        for (a, action) in rules.actions.enumerated() {
            let h = rules.pages.count + rules.elements.count + a
            hits[h].entryStart = Int32(entries.count)
            defer { hits[h].entryEnd = Int32(entries.count) }
            for (key, value) in action.userDefined {
                let start = bytes.count
                JSONOut.appendString(key, to: &bytes)
                bytes.append(0x3A)
                JSONOut.appendString(value, to: &bytes)
                entries.append(Entry(source: .constant, name: name(key), fragmentStart: Int32(start), fragmentEnd: Int32(bytes.count),
                                     property: -1, keyStart: 0, keyEnd: 0))
            }
            for p in action.pagePara {
                let start = bytes.count
                JSONOut.appendString(p.output, to: &bytes)
                bytes.append(0x3A)
                var entry = Entry(source: .none, name: name(p.output), fragmentStart: Int32(start), fragmentEnd: Int32(bytes.count),
                                  property: -1, keyStart: 0, keyEnd: 0)
                if !p.propertyPath.isEmpty {
                    let parts = p.propertyPath.split(separator: "/", maxSplits: 1)
                    if parts.count == 2 {
                        entry.source = .path
                        entry.property = name(String(parts[0]))
                        (entry.keyStart, entry.keyEnd) = put(Array(parts[1].utf8))
                    }
                } else {
                    entry.source = p.containIn == "1" ? .content : .property
                    if entry.source == .property { entry.property = name(p.propertyName) }
                    (entry.keyStart, entry.keyEnd) = put(Array(p.propertyName.utf8))
                }
                entries.append(entry)
            }
        }

        nameStarts = [Int32(bytes.count)]
        for n in names {
            bytes.append(contentsOf: n)
            nameStarts.append(Int32(bytes.count))
        }
        let longest = names.map(\.count).max() ?? 0
        for n in names { nameLengths |= 1 << UInt64(min(n.count, 63)) }
        nameOrder = names.indices.sorted { names[$0].count < names[$1].count }.map { Int32($0) }
        byLength = (0...(longest + 1)).map { c in Int32(names.filter { $0.count < c }.count) }
        for known in KnownProperty.allCases {
            let name = known.name.withUTF8Buffer { Array($0) }
            if let n = names.firstIndex(of: name) {
                nameOfKnown[known.rawValue] = Int32(n)
                hasKnownNames = true
            }
        }
        for (n, name) in names.enumerated() where !nameOfKnown.contains(Int32(n)) { otherNameLengths |= 1 << UInt64(min(name.count, 63)) }
    }
}
