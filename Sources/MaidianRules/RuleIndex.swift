import MaidianEvents
import MaidianConfig

// The matcher's load-time index. Every exact-match field of a rule goes into a 64-bit hash key, so an event
// finds its candidate rules with a few hash look-ups whatever the number of rules; candidates are then checked
// byte for byte (a hash collision costs a comparison, never a wrong match).
//
// Element rules are grouped by which optional fields they constrain (their `mask`: screen, page path, index,
// section, row, content, content item key / value). An event computes one key per mask present among the rules
// (a handful), each from its own values of those fields: a rule is found exactly when all its fields agree.

/// Keeps the tables' key spaces apart.
enum KeyTag: UInt64 {
    case ignored = 1, screen, pagePath, pagePV, action, gesture, tableView, element, field
}

/// The hash of `n` bytes at `p` in the key space `tag`.
@inline(__always)
func keyHash(_ tag: KeyTag, _ p: UnsafePointer<UInt8>?, _ n: Int) -> UInt64 {
    var h = Hash64()
    h.add(tag.rawValue)
    if let p { h.addSampled(p, n) } else { h.add(0) }
    return h.value
}

extension Hash64 {
    /// Adds up to 64 bytes fully; of longer strings the length, the first 16, 16 from the middle and the last 32
    /// bytes. Element paths are long and differ mostly at the end; every key is verified byte for byte, so a
    /// sampled hash only risks an extra comparison, never a wrong match.
    @inline(__always)
    mutating func addSampled(_ p: UnsafePointer<UInt8>, _ n: Int) {
        guard n > 64 else { add(p, n); return }
        let raw = UnsafeRawPointer(p)
        add(UInt64(n))
        @inline(__always) func word(_ offset: Int) -> UInt64 { raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        add(word(0)); add(word(8))
        add(word(n / 2 - 8)); add(word(n / 2))
        add(word(n - 32)); add(word(n - 24)); add(word(n - 16)); add(word(n - 8))
    }
}

@inline(__always)
func keyHash(_ tag: KeyTag, _ t: ByteView) -> UInt64 { keyHash(tag, t.start, t.count) }

func keyHash(_ tag: KeyTag, _ s: [UInt8]) -> UInt64 {
    s.withUnsafeBufferPointer { keyHash(tag, $0.baseAddress ?? emptyBytes, $0.count) }
}

/// A valid pointer for empty byte strings (`ByteView` uses a nil base for "absent").
nonisolated(unsafe) let emptyBytes: UnsafePointer<UInt8> = {
    let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    p.initialize(to: 0)
    return UnsafePointer(p)
}()

/// Hash key → rule numbers. Lists are slices of one flat array; `lookup` is one open-addressing probe.
struct Postings: Sendable {
    private var table: HashTable64
    /// The rule numbers, grouped by key.
    private(set) var rules: [Int32]

    init(_ keyed: [(key: UInt64, rule: Int)]) {
        var order: [UInt64] = []
        var lists: [UInt64: [Int32]] = [:]
        for (k, r) in keyed {
            if lists[k] == nil { order.append(k) }
            lists[k, default: []].append(Int32(r))
        }
        table = HashTable64(capacity: max(order.count, 8))
        rules = []
        rules.reserveCapacity(keyed.count)
        for k in order {
            let list = lists[k]!
            table.set(k, Int64(rules.count) << 32 | Int64(list.count))
            rules.append(contentsOf: list)
        }
    }

    var isEmpty: Bool { rules.isEmpty }

    /// Where the rules of `key` are in `rules` (empty when none).
    @inline(__always)
    func lookup(_ key: UInt64) -> Range<Int> {
        guard !rules.isEmpty, let v = table.get(key) else { return 0..<0 }
        let start = Int(v >> 32)
        return start..<(start + Int(v & 0xFFFF_FFFF))
    }
}

/// Every distinct string the exact fields of element rules use (paths, types, screens, page paths, contents,
/// content keys), numbered. An event's values are resolved to these numbers once (hash, probe, one byte
/// comparison); rules then compare numbers. A value no rule uses resolves to -1.
struct StringTable: Sendable {
    private var table: Postings
    private var bytes: [UInt8]
    /// String `n` is `bytes[starts[n]..<starts[n + 1]]`.
    private var starts: [Int]

    init(_ strings: [[UInt8]]) {
        bytes = strings.flatMap { $0 }
        starts = [0]
        for s in strings { starts.append(starts.last! + s.count) }
        table = Postings(strings.enumerated().map { (keyHash(.field, $0.element), $0.offset) })
    }

    /// The number of `t`, or -1.
    @inline(__always)
    func id(_ t: ByteView) -> Int32 {
        guard let p = t.start else { return -1 }
        for k in table.lookup(keyHash(.field, t)) {
            let n = Int(table.rules[k])
            let start = starts[n]
            if starts[n + 1] - start == t.count, bytes.withUnsafeBufferPointer({ Bytes.equal(p, $0.baseAddress! + start, t.count) }) {
                return Int32(n)
            }
        }
        return -1
    }
}

/// Numbers the strings rules use while the index is built.
private struct StringNumbering {
    var ids: [[UInt8]: Int32] = [:]
    var strings: [[UInt8]] = []

    mutating func id(_ s: String?) -> Int32 {
        guard let s else { return -1 }
        let b = Array(s.utf8)
        if let n = ids[b] { return n }
        ids[b] = Int32(strings.count)
        strings.append(b)
        return Int32(strings.count - 1)
    }
}

/// The fields an element rule constrains besides path and type.
struct FieldMask: OptionSet, Sendable, Hashable {
    let rawValue: UInt8
    static let screen = FieldMask(rawValue: 1)
    static let pagePath = FieldMask(rawValue: 2)
    static let index = FieldMask(rawValue: 4)
    static let section = FieldMask(rawValue: 8)
    static let row = FieldMask(rawValue: 16)
    static let content = FieldMask(rawValue: 32)
    static let itemKey = FieldMask(rawValue: 64)
    static let itemValue = FieldMask(rawValue: 128)
}

/// An element's (event's or rule's) field values as numbers: what keys and checks are made of. -1 / nil: absent,
/// or (for an event) a value no rule uses.
struct ElementFields {
    var path: Int32 = -1, type: Int32 = -1, page: Int32 = -1, pagePath: Int32 = -1, content: Int32 = -1
    var index: Int?, section: Int?, row: Int?
    var itemKey: Int32 = -1, itemValue: Int32 = -1

    /// The key of the rules with this path and type.
    @inline(__always)
    var pathType: UInt64 {
        var h = Hash64()
        h.add(KeyTag.element.rawValue)
        h.add(UInt64(UInt32(bitPattern: path)) << 32 | UInt64(UInt32(bitPattern: type)))
        return h.value
    }

    /// The key of the rules of mask `m` these values satisfy, or nil when one the mask needs is missing.
    @inline(__always)
    func key(_ m: FieldMask) -> UInt64? {
        var h = Hash64()
        h.add(UInt64(UInt32(bitPattern: path)) << 32 | UInt64(UInt32(bitPattern: type)))
        h.add(UInt64(m.rawValue))
        @inline(__always) func id(_ v: Int32) -> Bool {
            guard v >= 0 else { return false }
            h.add(UInt64(v))
            return true
        }
        @inline(__always) func number(_ v: Int?) -> Bool {
            guard let v else { return false }
            h.add(UInt64(bitPattern: Int64(v)))
            return true
        }
        if m.contains(.screen) && !id(page) { return nil }
        if m.contains(.pagePath) && !id(pagePath) { return nil }
        if m.contains(.index) && !number(index) { return nil }
        if m.contains(.section) && !number(section) { return nil }
        if m.contains(.row) && !number(row) { return nil }
        if m.contains(.content) && !id(content) { return nil }
        if m.contains(.itemKey) && !id(itemKey) { return nil }
        if m.contains(.itemValue) && !id(itemValue) { return nil }
        return h.value
    }
}

/// An element rule as numbers, checked exactly against an event's `ElementFields` (no hashing, no bytes).
struct ElementCheck: Sendable {
    /// -1: not constrained.
    var path: Int32, type: Int32, screen: Int32, pagePath: Int32, content: Int32, contentKey: Int32
    var index: Int, section: Int, row: Int
    var mask: FieldMask
    var groupByContent: Bool
    var hasVersions: Bool

    fileprivate init(_ r: ElementRule, _ n: inout StringNumbering) {
        path = n.id(r.path); type = n.id(r.type); screen = n.id(r.screen); pagePath = n.id(r.pagePath)
        content = n.id(r.content); contentKey = n.id(r.contentKey)
        index = r.index ?? 0; section = r.section ?? 0; row = r.row ?? 0
        groupByContent = r.groupByContent
        hasVersions = !r.appVersions.isEmpty
        var m: FieldMask = []
        if r.screen != nil { m.insert(.screen) }
        if r.pagePath != nil { m.insert(.pagePath) }
        if r.index != nil { m.insert(.index) }
        if r.section != nil { m.insert(.section) }
        if r.row != nil { m.insert(.row) }
        if r.contentKey != nil {
            m.insert(.itemKey)
            if r.content != nil { m.insert(.itemValue) }
        } else if r.content != nil {
            m.insert(.content)
        }
        mask = m
    }

    /// The rule's values as key material.
    var fields: ElementFields {
        var f = ElementFields(path: path, type: type, page: screen, pagePath: pagePath, content: -1)
        if mask.contains(.index) { f.index = index }
        if mask.contains(.section) { f.section = section }
        if mask.contains(.row) { f.row = row }
        if contentKey >= 0 {
            f.itemKey = contentKey
            f.itemValue = content
        } else {
            f.content = content
        }
        return f
    }
}

/// The compiled rules: what `RuleMatcher` looks events up in.
struct RuleIndex: Sendable {
    var ignored: Postings
    /// Page rules with a `screen`, by page.
    var pageByScreen: Postings
    /// Page rules with only a `page_path`, by page path.
    var pageByPath: Postings
    /// PAGEPV action rules, by page.
    var pagePV: Postings
    /// ACTION / GESTURE / TABLEVIEW rules, by kind-tagged identifier.
    var clickActions: Postings
    /// The strings element rules compare with.
    var strings: StringTable
    /// Element rules without a regex, by `ElementFields.key(mask)`.
    var elements: Postings
    /// The masks present among them (at most 64 distinct, see `init`).
    var masks: [FieldMask]
    /// Bit `n` set: `masks[n]` reads a content item.
    var itemMaskBits: UInt64
    /// `ElementFields.pathType` → bit set of the masks its rules use: a click on an element no rule names costs
    /// one probe, and one with rules computes only the keys they need.
    var masksByPathType: HashTable64
    /// Element definitions (a rule's drawings, or the rule): checks, versions, and which rule each belongs to.
    var elementChecks: [ElementCheck]
    var elementVersions: [[VersionCondition]]
    var elementOwner: [Int32]
    /// Page definitions' rule (the per-page arrays below are by definition).
    var pageOwner: [Int]
    /// Regex rules: pattern `n` of `regexes` is element rule `regexRules[n]`.
    var regexes: RegexSet
    var regexRules: [Int]
    /// Some `identifier_regex` rule reads content items.
    var regexUsesItems: Bool
    /// Bytes of the page rules' `screen` / `page_path`, the action rules' ids and the ignored pages.
    var pageScreens: [[UInt8]?], pagePaths: [[UInt8]?], actionIDs: [[UInt8]], ignoredPages: [[UInt8]]
    var pageVersions: [[VersionCondition]], actionKinds: [ActionKind], actionVersions: [[VersionCondition]]
    /// Page rules with only a `page_path` regex: pattern `n` of `pagePathRegexes` is page rule `pagePathRegexRules[n]`.
    var pagePathRegexes: RegexSet
    var pagePathRegexRules: [Int]
    /// `where:` conditions (and the regexes on page paths and contents the index does not cover), by hit number.
    var conditions: ConditionIndex

    init(rules: RulesFile, ignoredPages ignored: [String], regexCache: Int) throws {
        ignoredPages = ignored.map { Array($0.utf8) }
        self.ignored = Postings(ignoredPages.enumerated().map { (keyHash(.ignored, $0.element), $0.offset) })
        // `any_of` drawings are definitions of their own that hit their rule.
        var pageDefinitions: [PageRule] = []
        pageOwner = []
        for (i, r) in rules.pages.enumerated() {
            for d in r.definitions { pageDefinitions.append(d); pageOwner.append(i) }
        }
        pageScreens = pageDefinitions.map { $0.screen.map { Array($0.utf8) } }
        pagePaths = pageDefinitions.map { $0.pagePath.map { Array($0.utf8) } }
        var byScreen: [(key: UInt64, rule: Int)] = [], byPath: [(key: UInt64, rule: Int)] = []
        var pathPatterns: [String] = []
        var pathRegexRules: [Int] = []
        for i in pageDefinitions.indices {
            if let s = pageScreens[i] {
                byScreen.append((keyHash(.screen, s), i))
            } else if let p = pagePaths[i] {
                byPath.append((keyHash(.pagePath, p), i))
            } else if let re = pageDefinitions[i].pagePathRegex {
                pathPatterns.append(re)
                pathRegexRules.append(i)
            }
        }
        do {
            pagePathRegexes = try RegexSet(pathPatterns, cacheSlots: pathPatterns.isEmpty ? 0 : 1024)
            pagePathRegexRules = pathRegexRules
        } catch let e as RegexSet.CompileError {
            let rule = e.index.map { pageDefinitions[pathRegexRules[$0]] }
            throw PipelineError(code: .badValue, message: "bad regex in 'page_path'\(rule.map { " of rule '\($0.id)'" } ?? ""): \(e.message)",
                                location: rule?.idLocation, underlying: e)
        }
        pageVersions = pageDefinitions.map(\.appVersions)
        pageByScreen = Postings(byScreen)
        pageByPath = Postings(byPath)

        actionIDs = rules.actions.map { Array($0.id.utf8) }
        actionKinds = rules.actions.map(\.kind)
        actionVersions = rules.actions.map(\.appVersions)
        let perHit = rules.pages.map(\.postConditions) + rules.elements.map(\.postConditions) + rules.actions.map(\.conditions)
        let ids = rules.pages.map { ($0.id, $0.idLocation) } + rules.elements.map { ($0.id, $0.idLocation) } + rules.actions.map { ($0.id, $0.idLocation) }
        conditions = try ConditionIndex(perHit.contains { !$0.isEmpty } ? perHit : [], rule: { ids[$0] })
        var pv: [(key: UInt64, rule: Int)] = [], click: [(key: UInt64, rule: Int)] = []
        for (i, a) in rules.actions.enumerated() {
            if a.kind == .pagePV { pv.append((keyHash(.pagePV, actionIDs[i]), i)) } else { click.append((keyHash(a.kind.tag, actionIDs[i]), i)) }
        }
        pagePV = Postings(pv)
        clickActions = Postings(click)

        var numbering = StringNumbering()
        var elementDefinitions: [ElementRule] = []
        elementOwner = []
        for (i, r) in rules.elements.enumerated() {
            for d in r.definitions { elementDefinitions.append(d); elementOwner.append(Int32(i)) }
        }
        let checks = elementDefinitions.map { ElementCheck($0, &numbering) }
        elementChecks = checks
        elementVersions = elementDefinitions.map(\.appVersions)
        strings = StringTable(numbering.strings)
        var keyed: [(key: UInt64, rule: Int)] = []
        var keyedMasks: [(pathType: UInt64, mask: FieldMask)] = []
        var patterns: [String] = []
        var regexRules: [Int] = []
        for (i, r) in elementDefinitions.enumerated() {
            if let re = r.identifierRegex {
                patterns.append(re)
                regexRules.append(i)
            } else {
                let f = checks[i].fields
                keyed.append((f.key(checks[i].mask)!, i))
                keyedMasks.append((f.pathType, checks[i].mask))
            }
        }
        self.regexRules = regexRules
        elements = Postings(keyed)
        let masks = Set(keyedMasks.map(\.mask)).sorted { $0.rawValue < $1.rawValue }
        // At most 2 (screen) × 2 (page path) × 4 (index | section | section+row | none) × 4 (content | item key |
        // key+value | none) combinations: every mask fits a 64-bit set.
        precondition(masks.count <= 64)
        self.masks = masks
        itemMaskBits = 0
        for (n, m) in masks.enumerated() where m.contains(.itemKey) { itemMaskBits |= 1 << UInt64(n) }
        masksByPathType = HashTable64(capacity: max(keyedMasks.count, 8))
        for (pathType, mask) in keyedMasks {
            let bit = Int64(bitPattern: 1 << UInt64(masks.firstIndex(of: mask)!))
            masksByPathType.set(pathType, (masksByPathType.get(pathType) ?? 0) | bit)
        }
        regexUsesItems = regexRules.contains { checks[$0].contentKey >= 0 }
        do {
            regexes = try RegexSet(patterns, cacheSlots: regexCache)
        } catch let e as RegexSet.CompileError {
            // Each pattern compiled alone when the file loaded; together they can still exceed Hyperscan's limits.
            let rule = e.index.map { elementDefinitions[regexRules[$0]] }
            throw PipelineError(code: .badValue, message: "bad regex in 'identifier_regex'\(rule.map { " of rule '\($0.id)'" } ?? ""): \(e.message)",
                                location: rule?.idLocation, underlying: e)
        }
    }
}

extension ActionKind {
    /// The key space of a click action table.
    var tag: KeyTag {
        switch self {
        case .action: return .action
        case .gesture: return .gesture
        case .tableView: return .tableView
        case .pagePV: return .pagePV
        }
    }
}
