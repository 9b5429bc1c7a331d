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
    public var text: ByteView
    /// A value.
    @inlinable public init(kind: Kind, text: ByteView) { self.kind = kind; self.text = text }
}

/// Where conditions read an event's properties.
public protocol EventProperties {
    /// The first kept property called `name` (UTF-8 bytes), or nil. The text stays valid until the next call.
    mutating func value(of name: ByteView) -> PropertyValue?
    /// The same, where `known` is the `KnownProperty` raw value `name` is (`KnownProperty.none`: no known
    /// name): a reader that knows its properties' `Property.known` finds it without comparing names.
    mutating func value(of name: ByteView, known: UInt8) -> PropertyValue?
}

extension EventProperties {
    /// Looks the name up by its bytes.
    public mutating func value(of name: ByteView, known: UInt8) -> PropertyValue? { value(of: name) }
}

/// Per-event scratch of condition checks, owned by one caller (one thread). Everything is memoized per event
/// under a stamp that changes per event (nothing is cleared, nothing allocated after the first events): each
/// distinct test's result, each subject's value (looked up once, copied into `values`), and per regex subject
/// the set of its patterns that match the value, cached by the value's text. So an event pays per distinct
/// test and subject it needs, not per rule: thousands of rules that test `$os` or scan `$network_type` cost
/// one look-up, one scan (or a cache hit) and then a memo read per rule.
///
/// A value type for its owner; the state is one `ConditionState` object, so the per-test and per-subject
/// writes of a check are plain stores (no copy-on-write checks on a dozen arrays per rule).
public struct ConditionScratch {
    let state = ConditionState()

    /// Empty scratch (sized on first use).
    public init() {}
}

/// `ConditionScratch`'s state. Not `Sendable`: one thread's scratch.
final class ConditionState {
    /// One subject's state for the event whose stamp it holds.
    struct Subject {
        /// Stamp of the event whose value is loaded; its kind (`absentKind`: none), its place in `values`.
        var stamp: UInt32 = 0
        var kind: UInt8 = ConditionState.absentKind
        /// 0: not parsed as a number yet, 1: `number` holds it, 2: not a number.
        var numberState: UInt8 = 0
        var start: Int32 = 0, count: Int32 = 0
        var number: Double = 0
        /// The regex cache slot holding its value's pattern bits, valid when `regexStamp` is the event's.
        var regexStamp: UInt32 = 0
        var regexSlot: Int32 = -1
    }

    private(set) var stamp: UInt32 = 0
    private(set) var subjectCount = 0, testCount = 0
    /// Per test: `stamp << 1 | result` once evaluated for this event.
    private(set) var testMemo = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
    private(set) var subjects = UnsafeMutablePointer<Subject>.allocate(capacity: 1)
    /// The values of this event's subjects, one after the other (`valueCount` bytes of `valueCapacity`).
    private(set) var values = UnsafeMutablePointer<UInt8>.allocate(capacity: 256)
    private(set) var valueCount = 0
    private var valueCapacity = 256
    /// A string value with escapes, decoded (rare).
    var decoded: [UInt8] = []
    /// `regexSlotsPerSubject` direct-mapped slots per subject: a text and the bits of the patterns matching it.
    var regexCache: [RegexSlot] = []

    struct RegexSlot {
        var hash: UInt64 = 0
        var text: [UInt8] = []
        var bits: [UInt64] = []
    }

    static let absentKind: UInt8 = 0xFF
    static let regexSlotsPerSubject = 64

    init() {
        testMemo.initialize(to: 0)
        subjects.initialize(to: Subject())
    }

    deinit {
        testMemo.deallocate()
        subjects.deallocate()
        values.deallocate()
    }

    /// Starts the next event for an index of `subjectCount` subjects and `testCount` tests.
    func next(subjects subjectCount: Int, tests testCount: Int) {
        if subjectCount != self.subjectCount || testCount != self.testCount {
            testMemo.deallocate()
            subjects.deallocate()
            testMemo = .allocate(capacity: max(testCount, 1))
            testMemo.initialize(repeating: 0, count: max(testCount, 1))
            subjects = .allocate(capacity: max(subjectCount, 1))
            subjects.initialize(repeating: Subject(), count: max(subjectCount, 1))
            regexCache = Array(repeating: RegexSlot(), count: subjectCount * Self.regexSlotsPerSubject)
            self.subjectCount = subjectCount
            self.testCount = testCount
            stamp = 0
        }
        stamp &+= 1
        // Memo entries keep the stamp in 31 bits: start over before it wraps.
        if stamp == 0 || stamp >= 1 << 31 {
            testMemo.update(repeating: 0, count: max(testCount, 1))
            for s in 0..<subjectCount { subjects[s].stamp = 0; subjects[s].regexStamp = 0 }
            stamp = 1
        }
        valueCount = 0
    }

    /// Copies `text` to the end of `values`; returns where it starts.
    func appendValue(_ text: ByteView) -> Int32 {
        let start = valueCount, n = text.count
        if start + n > valueCapacity {
            var capacity = valueCapacity * 2
            while capacity < start + n { capacity *= 2 }
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            grown.update(from: values, count: start)
            values.deallocate()
            values = grown
            valueCapacity = capacity
        }
        if let p = text.start, n > 0 { (values + start).update(from: p, count: n) }
        valueCount = start + n
        return Int32(start)
    }

    /// Subject `s`'s loaded value (valid until `values` grows).
    @inline(__always)
    func value(_ s: Int) -> ByteView {
        ByteView(UnsafePointer(values + Int(subjects[s].start)), Int(subjects[s].count))
    }
}

/// The conditions of a rule set, compiled: per hit number, a list of test numbers; identical tests (same
/// subject, same test) are one test, evaluated at most once per event; per subject, one regex database.
/// A class: the matcher reads it per event, and a struct of sixteen arrays was retained field by field.
final class ConditionIndex: Sendable {
    enum Kind: UInt8, Sendable { case anyOf, noneOf, compare, regex }
    /// One distinct test. `values`: for any-of / none-of, its values in `valueStarts`; for a regex, its pattern
    /// number among its subject's patterns (`values.lowerBound`).
    struct Test: Sendable {
        var kind: Kind
        var op: ConditionTest.Comparison
        var subject: Int32
        var bound: Double
        var values: Range<Int32>
    }

    /// Tests of hit `h`: `hitTests[starts[h]..<starts[h + 1]]` (all must hold; a test on an absent value fails).
    let starts: [Int32]
    let hitTests: [Int32]
    let tests: [Test]
    /// Value `v` of any-of / none-of tests: `valueBytes[valueStarts[v]..<valueStarts[v + 1]]`, as a number `valueNumbers[v]` (NaN: none).
    let valueBytes: [UInt8]
    let valueStarts: [Int32]
    let valueNumbers: [Double]
    let subjects: [ConditionSubject]
    /// Subject `s`'s property name, or for a content item its key (the property is `$element_content`).
    let subjectBytes: [[UInt8]]
    /// Subject `s`'s property name as a `KnownProperty` raw value (`KnownProperty.none`: not a known one, or a content item).
    let subjectKnown: [UInt8]
    /// Whether subject `s` is a content item (else a property), and whether it is `$app_version` (read from
    /// `lib` when the properties have none).
    let subjectIsItem: [Bool], subjectIsAppVersion: [Bool]
    let regexes: [RegexSet]
    /// Words of subject `s`'s pattern bit sets.
    let regexWords: [Int]
    /// Some hit has conditions.
    var isEmpty: Bool { hitTests.isEmpty }

    /// Compiles `perHit[h]` (the conditions of hit number `h`); `rule(h)` names a rule in errors.
    init(_ perHit: [[Condition]], rule: (Int) -> (String, SourceLocation?)) throws {
        var starts: [Int32] = [0]
        var hitTests: [Int32] = []
        var tests: [Test] = []
        var valueBytes: [UInt8] = []
        var valueStarts: [Int32] = [0]
        var valueNumbers: [Double] = []
        var subjects: [ConditionSubject] = []
        var subjectBytes: [[UInt8]] = []
        var subjectKnown: [UInt8] = []
        var subjectNumbers: [ConditionSubject: Int] = [:]
        var testNumbers: [String: Int32] = [:]
        var patterns: [[String]] = []
        var patternNumbers: [[String: Int]] = []
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
                    case .property(let name):
                        subjectBytes.append(Array(name.utf8))
                        subjectKnown.append(KnownProperty.allCases.first { $0.name.description == name }.map { UInt8($0.rawValue) } ?? KnownProperty.none)
                    case .contentItem(let key):
                        subjectBytes.append(Array(key.utf8))
                        subjectKnown.append(KnownProperty.none)
                    }
                    patterns.append([])
                    patternNumbers.append([:])
                    patternOwner.append([])
                }
                for t in c.tests {
                    let key = "\(s)|\(t)"
                    if let n = testNumbers[key] { hitTests.append(n); continue }
                    var test = Test(kind: .anyOf, op: .gt, subject: Int32(s), bound: 0, values: 0..<0)
                    switch t {
                    case .anyOf(let values), .noneOf(let values):
                        if case .noneOf = t { test.kind = .noneOf }
                        let first = Int32(valueNumbers.count)
                        for v in values {
                            valueBytes.append(contentsOf: v.utf8)
                            valueStarts.append(Int32(valueBytes.count))
                            valueNumbers.append(Self.number(v) ?? .nan)
                        }
                        test.values = first..<Int32(valueNumbers.count)
                    case .compare(let op, let v):
                        test.kind = .compare; test.op = op; test.bound = v
                    case .regex(let pattern):
                        test.kind = .regex
                        let p: Int
                        if let n = patternNumbers[s][pattern] {
                            p = n
                        } else {
                            p = patterns[s].count
                            patternNumbers[s][pattern] = p
                            patterns[s].append(pattern)
                            patternOwner[s].append(h)
                        }
                        test.values = Int32(p)..<Int32(p + 1)
                    }
                    let n = Int32(tests.count)
                    testNumbers[key] = n
                    tests.append(test)
                    hitTests.append(n)
                }
            }
            starts.append(Int32(hitTests.count))
        }
        var regexes: [RegexSet] = []
        var regexWords: [Int] = []
        for (s, list) in patterns.enumerated() {
            regexWords.append((list.count + 63) / 64)
            do {
                // The subject's value is looked up in the scratch's cache first; this one catches the rest.
                regexes.append(try RegexSet(list, cacheSlots: list.isEmpty ? 0 : 1024))
            } catch let e as RegexSet.CompileError {
                // Each pattern compiled alone when the file loaded; together they can still exceed Hyperscan's limits.
                let owner = e.index.map { rule(patternOwner[s][$0]) }
                throw PipelineError(code: .badValue, message: "bad regex for '\(subjects[s])'\(owner.map { " of rule '\($0.0)'" } ?? ""): \(e.message)",
                                    location: owner?.1, underlying: e)
            }
        }
        self.starts = starts
        self.hitTests = hitTests
        self.tests = tests
        self.valueBytes = valueBytes
        self.valueStarts = valueStarts
        self.valueNumbers = valueNumbers
        self.subjects = subjects
        self.subjectBytes = subjectBytes
        self.subjectKnown = subjectKnown
        subjectIsItem = subjects.map { if case .contentItem = $0 { return true } else { return false } }
        subjectIsAppVersion = subjects.map { $0 == .property("$app_version") }
        self.regexes = regexes
        self.regexWords = regexWords
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
func numberValue(_ t: ByteView) -> Double? {
    guard let p = t.start, t.count > 0, t.count <= 40 else { return nil }
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
    // The match stage's reader: its look-ups inline instead of going through the protocol's witness.
    @_specialize(exported: false, where P == BatchEventProperties)
    public func applyConditions<P: EventProperties>(_ hits: inout [Int], from start: Int, properties: inout P, lib: ByteView,
                                                    scratch: inout ConditionScratch) {
        let index = self.index.conditions
        guard !index.isEmpty, start < hits.count else { return }
        var any = false
        for k in start..<hits.count where index.has(hits[k]) { any = true; break }
        guard any else { return }
        let st = scratch.state
        st.next(subjects: index.subjects.count, tests: index.tests.count)
        var kept = start
        for k in start..<hits.count {
            let h = hits[k]
            var holds = true
            for n in Int(index.starts[h])..<Int(index.starts[h + 1]) where !testHolds(Int(index.hitTests[n]), index, &properties, lib, st) {
                holds = false
                break
            }
            if holds {
                if kept != k { hits[kept] = h }
                kept += 1
            }
        }
        if kept < hits.count { hits.removeLast(hits.count - kept) }
    }

    /// Test `t`'s result for the current event, evaluated on first use.
    @inline(__always)
    private func testHolds<P: EventProperties>(_ t: Int, _ index: ConditionIndex, _ properties: inout P, _ lib: ByteView,
                                              _ st: ConditionState) -> Bool {
        let memo = st.testMemo[t]
        if memo >> 1 == st.stamp { return memo & 1 == 1 }
        let result = evaluate(index.tests[t], index, &properties, lib, st)
        st.testMemo[t] = st.stamp << 1 | (result ? 1 : 0)
        return result
    }

    private func evaluate<P: EventProperties>(_ t: ConditionIndex.Test, _ index: ConditionIndex, _ properties: inout P, _ lib: ByteView,
                                              _ st: ConditionState) -> Bool {
        let s = Int(t.subject)
        if st.subjects[s].stamp != st.stamp { load(s, index, &properties, lib, st) }
        let kind = st.subjects[s].kind
        if kind == ConditionState.absentKind { return false }
        switch t.kind {
        case .compare:
            guard kind == PropertyValue.Kind.number.rawValue || kind == PropertyValue.Kind.string.rawValue,
                  let x = number(s, st) else { return false }
            return t.op.holds(x, t.bound)
        case .anyOf:
            return equalsAny(t, s, kind, index, st)
        case .noneOf:
            return !equalsAny(t, s, kind, index, st)
        case .regex:
            guard kind != PropertyValue.Kind.object.rawValue && kind != PropertyValue.Kind.other.rawValue else { return false }
            if st.subjects[s].regexStamp != st.stamp { scanRegexes(s, index, st) }
            let p = Int(t.values.lowerBound)
            return st.regexCache[Int(st.subjects[s].regexSlot)].bits[p >> 6] & (1 << UInt64(p & 63)) != 0
        }
    }

    /// Loads subject `s`'s value for the current event into the scratch (absent when the event has none).
    private func load<P: EventProperties>(_ s: Int, _ index: ConditionIndex, _ properties: inout P, _ lib: ByteView,
                                          _ st: ConditionState) {
        st.subjects[s].stamp = st.stamp
        st.subjects[s].numberState = 0
        guard let v = value(s, index, &properties, lib, st) else {
            st.subjects[s].kind = ConditionState.absentKind
            return
        }
        st.subjects[s].kind = v.kind.rawValue
        st.subjects[s].count = Int32(v.text.count)
        st.subjects[s].start = st.appendValue(v.text)
    }

    private func number(_ s: Int, _ st: ConditionState) -> Double? {
        switch st.subjects[s].numberState {
        case 1: return st.subjects[s].number
        case 2: return nil
        default:
            let x = numberValue(st.value(s))
            st.subjects[s].numberState = x == nil ? 2 : 1
            st.subjects[s].number = x ?? 0
            return x
        }
    }

    /// Finds (or computes and caches) the bits of subject `s`'s patterns that match its value.
    private func scanRegexes(_ s: Int, _ index: ConditionIndex, _ st: ConditionState) {
        st.subjects[s].regexStamp = st.stamp
        let v = st.value(s)
        let count = v.count
        var h = Hash64()
        h.add(v.start ?? emptyBytes, count)
        h.add(UInt64(count))
        let hash = h.value | 1
        let slot = s * ConditionState.regexSlotsPerSubject + Int(truncatingIfNeeded: hash >> 20) & (ConditionState.regexSlotsPerSubject - 1)
        st.subjects[s].regexSlot = Int32(slot)
        let same = st.regexCache[slot].hash == hash && st.regexCache[slot].text.count == count
            && st.regexCache[slot].text.withUnsafeBufferPointer { Bytes.equal(($0.baseAddress ?? emptyBytes), v.start ?? emptyBytes, count) }
        if same { return }
        var bits = st.regexCache[slot].bits
        st.regexCache[slot].bits = []
        bits.removeAll(keepingCapacity: true)
        bits.append(contentsOf: repeatElement(0, count: index.regexWords[s]))
        index.regexes[s].forEachMatch(UnsafeRawBufferPointer(start: v.start ?? emptyBytes, count: count)) {
            bits[$0 >> 6] |= 1 << UInt64($0 & 63)
        }
        st.regexCache[slot].bits = bits
        st.regexCache[slot].hash = hash
        st.regexCache[slot].text.removeAll(keepingCapacity: true)
        st.regexCache[slot].text.append(contentsOf: UnsafeBufferPointer(start: v.start ?? emptyBytes, count: count))
    }

    /// Subject `s`'s value in the event (valid until the next look-up).
    private func value<P: EventProperties>(_ s: Int, _ index: ConditionIndex, _ properties: inout P, _ lib: ByteView,
                                           _ st: ConditionState) -> PropertyValue? {
        if !index.subjectIsItem[s] {
            let known = index.subjectKnown[s]
            let v = index.subjectBytes[s].withByteView { properties.value(of: $0, known: known) }
            if v == nil, index.subjectIsAppVersion[s], let b = lib.start, lib.count > 2 {
                let raw = UnsafeRawBufferPointer(start: b, count: lib.count)
                let member = RuleMatcher.appVersionName.withUnsafeBytes { JSONMembers.member($0, in: raw) }
                if let r = member, raw[r.lowerBound] == 0x22 { return stringValue(b + r.lowerBound + 1, r.count - 2, st) }
            }
            return v
        }
        let content = RuleMatcher.contentName.withByteView { properties.value(of: $0) }
        guard let obj = content, obj.kind == .object, let b = obj.text.start else { return nil }
        let raw = UnsafeRawBufferPointer(start: b, count: obj.text.count)
        let member = index.subjectBytes[s].withUnsafeBytes { JSONMembers.member($0, in: raw) }
        guard let r = member, raw[r.lowerBound] == 0x22 else { return nil }
        return stringValue(b + r.lowerBound + 1, r.count - 2, st)
    }

    /// A JSON string's content (without quotes), decoded into `st.decoded` when it has escapes (rare: the array
    /// is not touched again until the next look-up, so its bytes stay put).
    private func stringValue(_ p: UnsafePointer<UInt8>, _ n: Int, _ st: ConditionState) -> PropertyValue {
        for i in 0..<n where p[i] == 0x5C {
            st.decoded = unescapeJSONString(UnsafeRawBufferPointer(start: p, count: n))
            return st.decoded.withUnsafeBufferPointer { PropertyValue(kind: .string, text: ByteView($0.baseAddress ?? emptyBytes, $0.count)) }
        }
        return PropertyValue(kind: .string, text: ByteView(p, n))
    }

    private func equalsAny(_ t: ConditionIndex.Test, _ s: Int, _ kind: UInt8, _ index: ConditionIndex, _ st: ConditionState) -> Bool {
        guard kind == PropertyValue.Kind.string.rawValue || kind == PropertyValue.Kind.bool.rawValue || kind == PropertyValue.Kind.number.rawValue else {
            return false
        }
        let v = st.value(s)
        let textEqual = index.valueBytes.withUnsafeBufferPointer { bytes in
            for n in Int(t.values.lowerBound)..<Int(t.values.upperBound) {
                let a = Int(index.valueStarts[n]), b = Int(index.valueStarts[n + 1])
                if b - a == v.count, Bytes.equal((bytes.baseAddress ?? emptyBytes) + a, v.start ?? emptyBytes, v.count) { return true }
            }
            return false
        }
        if textEqual || kind != PropertyValue.Kind.number.rawValue { return textEqual }
        guard let x = number(s, st) else { return false }
        for n in Int(t.values.lowerBound)..<Int(t.values.upperBound) where index.valueNumbers[n] == x { return true }
        return false
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

    mutating func value(of name: ByteView) -> PropertyValue? {
        for (k, json) in pairs where k.withByteView({ $0.equals(name) }) {
            guard let first = json.utf8.first else { return nil }
            let kind: PropertyValue.Kind
            switch first {
            case 0x22:
                storage = json.utf8.withContiguousStorageIfAvailable { unescapeJSONString(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer($0).dropFirst().dropLast())) }
                    ?? Array(json.utf8.dropFirst().dropLast())
                return storage.withUnsafeBufferPointer { PropertyValue(kind: .string, text: ByteView($0.baseAddress ?? emptyBytes, $0.count)) }
            case 0x7B: kind = .object
            case 0x74, 0x66: kind = .bool
            case 0x6E, 0x5B: kind = .other
            default: kind = .number
            }
            storage = Array(json.utf8)
            return storage.withUnsafeBufferPointer { PropertyValue(kind: kind, text: ByteView($0.baseAddress ?? emptyBytes, $0.count)) }
        }
        return nil
    }
}

/// `EventProperties` over one event's kept properties in a batch (`EventBatch.withPropertyLookup`): escaped
/// and replaced strings are decoded, the rest is read in place.
public struct BatchEventProperties: EventProperties {
    let lookup: EventPropertyLookup
    /// A string with escapes, decoded (rare).
    var decoded: [UInt8] = []

    /// A reader over `lookup`'s event.
    public init(_ lookup: EventPropertyLookup) { self.lookup = lookup }

    public mutating func value(of name: ByteView) -> PropertyValue? {
        value(of: name, known: KnownProperty.none)
    }

    public mutating func value(of name: ByteView, known: UInt8) -> PropertyValue? {
        guard let p = lookup.first(named: name, known: known) else { return nil }
        let value = lookup.value(of: p)
        switch p.kind {
        case .string:
            guard value.count >= 2 else { return nil }
            let content = value[1..<(value.count - 1)]
            if p.fix == .replace || p.valueEscaped {
                decoded = content.unescaped
                // Not touched again until the next look-up: the bytes stay put.
                return decoded.withByteView { PropertyValue(kind: .string, text: $0) }
            }
            return PropertyValue(kind: .string, text: content)
        case .number: return PropertyValue(kind: .number, text: value)
        case .bool: return PropertyValue(kind: .bool, text: value)
        case .object: return PropertyValue(kind: .object, text: value)
        case .null, .array: return PropertyValue(kind: .other, text: value)
        }
    }
}

extension RuleMatcher {
    /// `applyConditions` over the kept properties of the batch event `head` describes (its `lib` for
    /// `$app_version`). The reader's type is known in this module, so the condition code is specialized for it
    /// (called with a reader type from another module, every look-up went through the protocol's witness).
    public func applyConditions(_ hits: inout [Int], from start: Int, batch: borrowing EventBatch, event head: EventHead,
                                scratch: inout ConditionScratch) {
        guard hasConditions, start < hits.count else { return }
        batch.withPropertyLookup(of: head) { lookup in
            var reader = BatchEventProperties(lookup)
            let lib = head.lib.isPresent ? lookup.json[head.lib] : ByteView.absent
            applyConditions(&hits, from: start, properties: &reader, lib: lib, scratch: &scratch)
        }
    }
}
