import MaidianEvents
import MaidianConfig

// `where:` conditions (and regexes on `page_path` / `content`). They read properties the matcher's index
// does not know about, so they are not part of any index key: a rule's conditions are checked only once its
// index key matched (a post-filter of the candidates), and all regexes on one subject are one Hyperscan
// database, scanned at most once per event, whatever the number of rules.

/// What a condition reads.
public enum ConditionSubject: Sendable, Hashable, CustomStringConvertible {
    /// A property of the event (for `$app_version`, `lib`'s when the properties have none).
    case property(String)
    /// A string item of a composite `$element_content` (an element rule's `content_key`).
    case contentItem(String)

    /// How it reads in messages.
    public var description: String {
        switch self {
        case .property(let name): return name
        case .contentItem(let key): return "$element_content[\(key)]"
        }
    }
}

/// One test of a condition on a value.
public enum ConditionTest: Sendable, Equatable {
    /// Equal to one of these (a scalar is a list of one).
    case anyOf([String])
    /// Present and equal to none of these.
    case noneOf([String])
    /// A numeric comparison: the value is a number (or a string holding one).
    case compare(Comparison, Double)
    /// A regex (Hyperscan's dialect, as `identifier_regex`) over the value's text.
    case regex(String)

    /// A numeric comparison's operator.
    public enum Comparison: String, Sendable, CaseIterable {
        case gt = ">", ge = ">=", lt = "<", le = "<="

        func holds(_ a: Double, _ b: Double) -> Bool {
            switch self {
            case .gt: return a > b
            case .ge: return a >= b
            case .lt: return a < b
            case .le: return a <= b
            }
        }
    }
}

/// A condition: every test holds on the subject's value (an absent value satisfies none).
public struct Condition: Sendable, Equatable {
    /// What it reads.
    public var subject: ConditionSubject
    /// All must hold.
    public var tests: [ConditionTest]
    /// Where it is written (not part of equality).
    public var location: SourceLocation?

    /// A condition.
    public init(_ subject: ConditionSubject, _ tests: [ConditionTest], location: SourceLocation? = nil) {
        self.subject = subject; self.tests = tests; self.location = location
    }

    public static func == (a: Condition, b: Condition) -> Bool { a.subject == b.subject && a.tests == b.tests }

    /// Parses a `where:` mapping: `{name: scalar | [scalars] | {op: value, ...}}`. Errors are located at the
    /// offending key or value.
    static func parseWhere(_ node: ConfigNode) throws -> [Condition] {
        guard let entries = node.entries else {
            throw PipelineError(code: .badType, message: "'where' must be a mapping of property names to conditions", location: node.location,
                                hint: "e.g. where: {item_name: Phones, price: {\">\": 10}}")
        }
        var out: [Condition] = []
        for e in entries {
            if e.key.isEmpty { throw PipelineError(code: .badValue, message: "empty property name in 'where'", location: e.keyLocation) }
            out.append(Condition(.property(e.key), try parseTests(e.value, name: e.key), location: e.keyLocation))
        }
        return out
    }

    /// The tests of one condition's value.
    static func parseTests(_ v: ConfigNode, name: String) throws -> [ConditionTest] {
        if v.isScalar {
            guard let s = v.string else {
                throw PipelineError(code: .badValue, message: "condition on '\(name)' has no value", location: v.location,
                                    hint: "a value, a list (any of), or {\">\": 10}, {regex: \"^Sale\"}, {\"!=\": x}")
            }
            return [.anyOf([s])]
        }
        if v.isSequence { return [.anyOf(try scalars(v, name: name, op: nil))] }
        guard let ops = v.entries, !ops.isEmpty else {
            throw PipelineError(code: .badValue, message: "empty condition on '\(name)'", location: v.location)
        }
        var tests: [ConditionTest] = []
        for op in ops {
            switch op.key {
            case "=", "==", "in":
                tests.append(.anyOf(try scalars(op.value, name: name, op: op.key)))
            case "!=", "not_in":
                tests.append(.noneOf(try scalars(op.value, name: name, op: op.key)))
            case "regex":
                guard let pattern = op.value.string, op.value.isScalar else {
                    throw PipelineError(code: .badType, message: "'regex' of '\(name)' must be a string", location: op.value.location)
                }
                do { try RegexSet.check(pattern) } catch let e as RegexSet.CompileError {
                    throw PipelineError(code: .badValue, message: "bad regex for '\(name)': \(e.message)", location: op.value.location)
                }
                tests.append(.regex(pattern))
            default:
                guard let c = ConditionTest.Comparison(rawValue: op.key) else {
                    throw PipelineError(code: .unknownKey, message: "unknown condition '\(op.key)' on '\(name)'", location: op.keyLocation,
                                        hint: "use =, !=, in, not_in, >, >=, <, <= or regex")
                }
                guard let text = op.value.string, op.value.isScalar, let number = Double(text), number.isFinite else {
                    throw PipelineError(code: .badValue, message: "'\(op.key)' of '\(name)' needs a number", location: op.value.location)
                }
                tests.append(.compare(c, number))
            }
        }
        return tests
    }

    private static func scalars(_ v: ConfigNode, name: String, op: String?) throws -> [String] {
        let what = op.map { "'\($0)' of '\(name)'" } ?? "condition on '\(name)'"
        if v.isScalar, let s = v.string { return [s] }
        guard let items = v.elements, !items.isEmpty else {
            throw PipelineError(code: .badValue, message: "\(what) needs a value or a non-empty list", location: v.location)
        }
        return try items.map { item in
            guard item.isScalar, let s = item.string else {
                throw PipelineError(code: .badType, message: "\(what): list items must be scalars", location: item.location)
            }
            return s
        }
    }

    /// A regex given as `{regex: "..."}` in place of an exact string (`page_path`, `content`); nil for a string.
    static func regexValue<K: CodingKey>(_ decoder: any Decoder, _ key: K) throws -> String? {
        guard let node = decoder.configNode?[key.stringValue], node.isMapping else { return nil }
        guard let entries = node.entries, entries.count == 1, entries[0].key == "regex" else {
            throw PipelineError(code: .badValue, message: "'\(key.stringValue)' takes a string or {regex: \"...\"}", location: node.location)
        }
        let pattern = entries[0].value
        guard pattern.isScalar, let text = pattern.string else {
            throw PipelineError(code: .badType, message: "'regex' of '\(key.stringValue)' must be a string", location: pattern.location)
        }
        do { try RegexSet.check(text) } catch let e as RegexSet.CompileError {
            throw PipelineError(code: .badValue, message: "bad regex in '\(key.stringValue)': \(e.message)", location: pattern.location)
        }
        return text
    }
}

/// A property's value as conditions read it: its kind and text (a string's content without quotes and with
/// escapes decoded; a number's or bool's text as written; an object's whole JSON).
public struct PropertyValue {
    /// The JSON kind.
    public enum Kind: UInt8, Sendable { case string, number, bool, object, other }
    /// The kind.
    public var kind: Kind
    /// The text (valid until the next look-up).
    public var text: RawText
    /// A value.
    @inlinable public init(kind: Kind, text: RawText) { self.kind = kind; self.text = text }
}

/// Where conditions read an event's properties.
public protocol EventProperties {
    /// The first kept property called `name` (UTF-8 bytes), or nil. The text stays valid until the next call.
    mutating func value(of name: UnsafeRawBufferPointer) -> PropertyValue?
}

/// Per-event scratch of condition checks, owned by one caller (one thread): which regex subjects were
/// scanned for the current event and which of their patterns matched. Stamps change per event: nothing is
/// cleared, nothing allocated after the first events.
public struct ConditionScratch {
    var stamp: UInt32 = 0
    var scanned: [UInt32] = []
    var matched: [UInt32] = []
    var decoded: [UInt8] = []

    /// Empty scratch (sized on first use).
    public init() {}

    mutating func next(subjects: Int, patterns: Int) {
        if scanned.count != subjects || matched.count != patterns {
            scanned = Array(repeating: 0, count: subjects)
            matched = Array(repeating: 0, count: patterns)
            stamp = 0
        }
        stamp &+= 1
        if stamp == 0 {
            for i in scanned.indices { scanned[i] = 0 }
            for i in matched.indices { matched[i] = 0 }
            stamp = 1
        }
    }
}

/// The conditions of a rule set, compiled: per hit number, a range of conditions; per subject, one regex database.
struct ConditionIndex: Sendable {
    enum Test: Sendable {
        case anyOf([[UInt8]], [Double?])
        case noneOf([[UInt8]], [Double?])
        case compare(ConditionTest.Comparison, Double)
        /// A pattern number over all subjects.
        case regex(Int)
    }
    struct Compiled: Sendable {
        var subject: Int
        var tests: Range<Int>
    }

    /// Conditions of hit `h`: `conditions[starts[h]..<starts[h + 1]]`.
    var starts: [Int32]
    var conditions: [Compiled] = []
    var tests: [Test] = []
    var subjects: [ConditionSubject] = []
    /// Subject `s`'s property name, or for a content item its key (the property is `$element_content`).
    var subjectBytes: [[UInt8]] = []
    var regexes: [RegexSet] = []
    /// Pattern `p` of subject `s` is number `regexBase[s] + p`.
    var regexBase: [Int] = []
    var patternCount = 0
    /// Some hit has conditions.
    var isEmpty: Bool { conditions.isEmpty }

    /// Compiles `perHit[h]` (the conditions of hit number `h`); `rule(h)` names a rule in errors.
    init(_ perHit: [[Condition]], rule: (Int) -> (String, SourceLocation?)) throws {
        starts = [0]
        var subjectNumbers: [ConditionSubject: Int] = [:]
        var patterns: [[String]] = []
        var patternOwner: [[Int]] = []
        for (h, conds) in perHit.enumerated() {
            for c in conds {
                let s: Int
                if let n = subjectNumbers[c.subject] {
                    s = n
                } else {
                    s = subjects.count
                    subjectNumbers[c.subject] = s
                    subjects.append(c.subject)
                    switch c.subject {
                    case .property(let name): subjectBytes.append(Array(name.utf8))
                    case .contentItem(let key): subjectBytes.append(Array(key.utf8))
                    }
                    patterns.append([])
                    patternOwner.append([])
                }
                let first = tests.count
                for t in c.tests {
                    switch t {
                    case .anyOf(let values): tests.append(.anyOf(values.map { Array($0.utf8) }, values.map(Self.number)))
                    case .noneOf(let values): tests.append(.noneOf(values.map { Array($0.utf8) }, values.map(Self.number)))
                    case .compare(let op, let v): tests.append(.compare(op, v))
                    case .regex(let pattern):
                        tests.append(.regex(-1 - patterns[s].count))  // resolved below, once bases are known
                        patterns[s].append(pattern)
                        patternOwner[s].append(h)
                    }
                }
                conditions.append(Compiled(subject: s, tests: first..<tests.count))
            }
            starts.append(Int32(conditions.count))
        }
        for (s, list) in patterns.enumerated() {
            regexBase.append(patternCount)
            patternCount += list.count
            do {
                // Values repeat (the same titles, paths, versions): results are cached by text.
                regexes.append(try RegexSet(list, cacheSlots: list.isEmpty ? 0 : 1024))
            } catch let e as RegexSet.CompileError {
                // Each pattern compiled alone when the file loaded; together they can still exceed Hyperscan's limits.
                let owner = e.index.map { rule(patternOwner[s][$0]) }
                throw PipelineError(code: .badValue, message: "bad regex for '\(subjects[s])'\(owner.map { " of rule '\($0.0)'" } ?? ""): \(e.message)",
                                    location: owner?.1, underlying: e)
            }
        }
        for c in conditions {
            for t in c.tests {
                if case .regex(let local) = tests[t], local < 0 { tests[t] = .regex(regexBase[c.subject] + (-1 - local)) }
            }
        }
    }

    /// A condition value's number, when it is one.
    static func number(_ s: String) -> Double? {
        guard let d = Double(s), d.isFinite else { return nil }
        return d
    }

    /// Whether hit `h` has conditions.
    @inline(__always)
    func has(_ h: Int) -> Bool { starts[h] != starts[h + 1] }
}

/// A number's value from its text (JSON number, or a string holding one); nil otherwise. Short texts make
/// small Strings: no allocation.
@inline(__always)
func numberValue(_ t: RawText) -> Double? {
    guard let p = t.base, t.count > 0, t.count <= 40 else { return nil }
    // Integers up to 15 digits (screen sizes, prices in cents, counts): exact as a Double, no parsing call.
    if t.count <= 16 {
        let first = p[0] == 0x2D ? 1 : 0
        var i = first
        var v: Int64 = 0
        while i < t.count, p[i] >= 0x30 && p[i] <= 0x39 { v = v &* 10 &+ Int64(p[i] &- 0x30); i += 1 }
        if i == t.count && i > first { return Double(first == 1 ? -v : v) }
    }
    let c = p[0]
    guard (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2B || c == 0x2E else { return nil }
    guard let d = Double(String(decoding: UnsafeBufferPointer(start: p, count: t.count), as: UTF8.self)), d.isFinite else { return nil }
    return d
}

extension RuleMatcher {
    /// Whether some rule has conditions (`where:`, or a regex on `page_path` / `content` checked after the index).
    public var hasConditions: Bool { !index.conditions.isEmpty }

    /// Removes from `hits[start...]` the hits whose conditions do not hold for the event whose properties
    /// `properties` reads (`lib`: its `lib` object, for `$app_version`). Order is kept.
    public func applyConditions<P: EventProperties>(_ hits: inout [Int], from start: Int, properties: inout P, lib: RawText,
                                                    scratch: inout ConditionScratch) {
        guard !index.conditions.isEmpty, start < hits.count else { return }
        var any = false
        for k in start..<hits.count where index.conditions.has(hits[k]) { any = true; break }
        guard any else { return }
        scratch.next(subjects: index.conditions.subjects.count, patterns: index.conditions.patternCount)
        var kept = start
        for k in start..<hits.count {
            let h = hits[k]
            if !index.conditions.has(h) || conditionsHold(h, &properties, lib, &scratch) {
                hits[kept] = h
                kept += 1
            }
        }
        hits.removeLast(hits.count - kept)
    }

    private func conditionsHold<P: EventProperties>(_ h: Int, _ properties: inout P, _ lib: RawText, _ scratch: inout ConditionScratch) -> Bool {
        for n in Int(index.conditions.starts[h])..<Int(index.conditions.starts[h + 1]) {
            let cond = index.conditions.conditions[n]
            guard let value = value(cond.subject, &properties, lib, &scratch) else { return false }
            for t in cond.tests where !testHolds(index.conditions.tests[t], cond.subject, value, &scratch) { return false }
        }
        return true
    }

    /// Subject `s`'s value in the event (valid until the next look-up).
    private func value<P: EventProperties>(_ s: Int, _ properties: inout P, _ lib: RawText, _ scratch: inout ConditionScratch) -> PropertyValue? {
        switch index.conditions.subjects[s] {
        case .property:
            let v = index.conditions.subjectBytes[s].withUnsafeBytes { properties.value(of: $0) }
            if v == nil, index.conditions.subjectBytes[s] == RuleMatcher.appVersionName, let b = lib.base, lib.count > 2 {
                let raw = UnsafeRawBufferPointer(start: b, count: lib.count)
                let member = RuleMatcher.appVersionName.withUnsafeBytes { MiniJSON.member($0, in: raw) }
                if let r = member, raw[r.lowerBound] == 0x22 { return stringValue(b + r.lowerBound + 1, r.count - 2, &scratch) }
            }
            return v
        case .contentItem:
            let content = RuleMatcher.contentName.withUnsafeBytes { properties.value(of: $0) }
            guard let obj = content, obj.kind == .object, let b = obj.text.base else { return nil }
            let raw = UnsafeRawBufferPointer(start: b, count: obj.text.count)
            let member = index.conditions.subjectBytes[s].withUnsafeBytes { MiniJSON.member($0, in: raw) }
            guard let r = member, raw[r.lowerBound] == 0x22 else { return nil }
            return stringValue(b + r.lowerBound + 1, r.count - 2, &scratch)
        }
    }

    /// A JSON string's content (without quotes), decoded into `scratch` when it has escapes (rare: the array
    /// is not touched again until the next look-up, so its bytes stay put).
    private func stringValue(_ p: UnsafePointer<UInt8>, _ n: Int, _ scratch: inout ConditionScratch) -> PropertyValue {
        for i in 0..<n where p[i] == 0x5C {
            scratch.decoded = unescapeJSONString(UnsafeRawBufferPointer(start: p, count: n))
            return scratch.decoded.withUnsafeBufferPointer { PropertyValue(kind: .string, text: RawText($0.baseAddress ?? emptyBytes, $0.count)) }
        }
        return PropertyValue(kind: .string, text: RawText(p, n))
    }

    private func testHolds(_ t: ConditionIndex.Test, _ subject: Int, _ v: PropertyValue, _ scratch: inout ConditionScratch) -> Bool {
        switch t {
        case .anyOf(let texts, let numbers):
            return equalsAny(v, texts, numbers)
        case .noneOf(let texts, let numbers):
            return !equalsAny(v, texts, numbers)
        case .compare(let op, let bound):
            guard v.kind == .number || v.kind == .string, let x = numberValue(v.text) else { return false }
            return op.holds(x, bound)
        case .regex(let pattern):
            guard v.kind != .object && v.kind != .other, let p = v.text.base else { return false }
                if scratch.scanned[subject] != scratch.stamp {
                scratch.scanned[subject] = scratch.stamp
                let base = index.conditions.regexBase[subject], stamp = scratch.stamp
                index.conditions.regexes[subject].forEachMatch(UnsafeRawBufferPointer(start: p, count: v.text.count)) { scratch.matched[base + $0] = stamp }
            }
            return scratch.matched[pattern] == scratch.stamp
        }
    }

    private func equalsAny(_ v: PropertyValue, _ texts: [[UInt8]], _ numbers: [Double?]) -> Bool {
        switch v.kind {
        case .string, .bool:
            for t in texts where v.text.equals(t) { return true }
            return false
        case .number:
            for t in texts where v.text.equals(t) { return true }
            guard let x = numberValue(v.text) else { return false }
            for n in numbers where n == x { return true }
            return false
        case .object, .other:
            return false
        }
    }

    static let appVersionName = Array("$app_version".utf8)
    /// `$app_version` (a key in `lib`).
    public static var appVersionKey: [UInt8] { appVersionName }
    static let contentName = Array("$element_content".utf8)
}

/// `EventProperties` over name → JSON value text pairs (`EventFacts.properties`).
struct FactsProperties: EventProperties {
    let pairs: [(String, String)]
    var storage: [UInt8] = []

    init(pairs: [(String, String)]) { self.pairs = pairs }

    /// The facts' properties, with `$page_path`, `$app_version` and `$element_content` from the facts when absent.
    init(_ f: EventFacts) {
        var pairs = f.properties
        func add(_ name: String, _ json: String?) {
            if let json, !pairs.contains(where: { $0.0 == name }) { pairs.append((name, json)) }
        }
        func quoted(_ s: String?) -> String? {
            s.map { var out: [UInt8] = []; JSONOut.appendString($0, to: &out); return String(decoding: out, as: UTF8.self) }
        }
        add("$page_path", quoted(f.pagePath))
        add("$app_version", quoted(f.appVersion))
        add("$screen_name", quoted(f.screenName))
        if let c = f.content {
            add("$element_content", quoted(c))
        } else if !f.contentItems.isEmpty {
            var out: [UInt8] = [0x7B]
            for (n, (k, v)) in f.contentItems.enumerated() {
                if n > 0 { out.append(0x2C) }
                JSONOut.appendString(k, to: &out); out.append(0x3A); JSONOut.appendString(v, to: &out)
            }
            out.append(0x7D)
            add("$element_content", String(decoding: out, as: UTF8.self))
        }
        self.pairs = pairs
    }

    mutating func value(of name: UnsafeRawBufferPointer) -> PropertyValue? {
        for (k, json) in pairs where k.utf8.elementsEqual(name) {
            guard let first = json.utf8.first else { return nil }
            let kind: PropertyValue.Kind
            switch first {
            case 0x22:
                storage = json.utf8.withContiguousStorageIfAvailable { unescapeJSONString(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0).dropFirst().dropLast())) }
                    ?? Array(json.utf8.dropFirst().dropLast())
                return storage.withUnsafeBufferPointer { PropertyValue(kind: .string, text: RawText($0.baseAddress ?? emptyBytes, $0.count)) }
            case 0x7B: kind = .object
            case 0x74, 0x66: kind = .bool
            case 0x6E, 0x5B: kind = .other
            default: kind = .number
            }
            storage = Array(json.utf8)
            return storage.withUnsafeBufferPointer { PropertyValue(kind: kind, text: RawText($0.baseAddress ?? emptyBytes, $0.count)) }
        }
        return nil
    }
}
