import MaidianEvents

/// A property's text as raw bytes (a JSON string's content without quotes and without escapes, or a
/// number's/bool's text as written); `base == nil` means absent.
public struct RawText {
    public var base: UnsafePointer<UInt8>?
    public var count: Int
    @inlinable public init(_ base: UnsafePointer<UInt8>?, _ count: Int) { self.base = base; self.count = count }
    @inlinable public static var absent: RawText { RawText(nil, 0) }
    @inlinable public var isPresent: Bool { base != nil }

    /// Whether every byte is ASCII and not NUL.
    @inline(__always) var isPlainASCII: Bool {
        guard let b = base else { return true }
        var i = 0
        let raw = UnsafeRawPointer(b)
        while i &+ 8 <= count {
            let v = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // A high bit set, or (for bytes below 0x80) a zero byte.
            if v & 0x8080_8080_8080_8080 != 0 || (v &- 0x0101_0101_0101_0101) & ~v & 0x8080_8080_8080_8080 != 0 { return false }
            i &+= 8
        }
        while i < count {
            if b[i] >= 0x80 || b[i] == 0 { return false }
            i &+= 1
        }
        return true
    }

    var string: String { String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) }
}

/// `EventFacts` as raw bytes into the batch (valid while the matcher runs): no allocation on the common path.
public struct RawFacts {
    public var screenName = RawText.absent, currentURL = RawText.absent, pagePath = RawText.absent
    public var appVersion = RawText.absent
    /// The event's `lib` object (for `$app_version` when the properties have none).
    public var lib = RawText.absent
    public var elementPath = RawText.absent, elementType = RawText.absent
    public var elementPosition = RawText.absent, elementIndex = RawText.absent
    /// `$element_content` when it is a string.
    public var content = RawText.absent
    /// `$element_content`'s whole value when it is a kept object.
    public var contentObject = RawText.absent
    public var elementKind = RawText.absent, target = RawText.absent, action = RawText.absent
    public var container = RawText.absent, tag = RawText.absent
    public init() {}
    /// The page: `$screen_name`, else `current_url`.
    @inlinable public var page: RawText { screenName.isPresent ? screenName : currentURL }
}

/// A string-keyed table searchable by raw bytes: a 64-bit hash of the bytes, verified byte for byte. Exact for
/// ASCII (where String equality is byte equality); other bytes use the String dictionary.
struct ByteTable: Sendable {
    struct Entry: Sendable {
        var key: [UInt8]
        /// For pair keys: where the second part starts (after a NUL).
        var split: Int
        var list: [Int]
    }
    private var slots: [UInt64: [Entry]] = [:]
    /// Some key is not plain ASCII: byte lookups go through `slow`.
    private var slowOnly = false
    private var slow: [String: [Int]] = [:]

    static func hash(_ t: RawText) -> UInt64 {
        var h = Hash64()
        if let b = t.base { h.add(b, t.count) } else { h.add(0) }
        return h.value
    }

    static func hash(_ a: RawText, _ b: RawText) -> UInt64 {
        var h = Hash64()
        h.add(a.base!, a.count)
        h.add(0x5EED)
        h.add(b.base!, b.count)
        return h.value
    }

    init(_ dict: [String: [Int]]) {
        slow = dict
        for (k, list) in dict {
            var s = k
            s.withUTF8 { u in
                let t = RawText(u.baseAddress ?? UnsafePointer(bitPattern: 1)!, u.count)
                if !t.isPlainASCII { slowOnly = true }
                slots[ByteTable.hash(t), default: []].append(Entry(key: Array(u), split: -1, list: list))
            }
        }
    }

    /// Pair keys (`a`, `b`); `slow` is keyed by `a + "\0" + b`.
    init(pairs: [(String, String, Int)], slow: [String: [Int]]) {
        self.slow = slow
        var index: [[UInt8]: Int] = [:]
        var entries: [Entry] = []
        for (a, b, i) in pairs {
            var a = a, b = b
            let key = Array(a.utf8) + [0] + Array(b.utf8)
            if let n = index[key] { entries[n].list.append(i); continue }
            a.withUTF8 { ua in
                b.withUTF8 { ub in
                    let ta = RawText(ua.baseAddress ?? UnsafePointer(bitPattern: 1)!, ua.count)
                    let tb = RawText(ub.baseAddress ?? UnsafePointer(bitPattern: 1)!, ub.count)
                    if !ta.isPlainASCII || !tb.isPlainASCII { slowOnly = true }
                }
            }
            index[key] = entries.count
            entries.append(Entry(key: key, split: a.utf8.count + 1, list: [i]))
        }
        for e in entries {
            e.key.withUnsafeBufferPointer { k in
                let base = k.baseAddress!
                let h = ByteTable.hash(RawText(base, e.split - 1), RawText(base + e.split, e.key.count - e.split))
                slots[h, default: []].append(e)
            }
        }
    }

    var isEmpty: Bool { slow.isEmpty }

    func lookup(_ t: RawText) -> [Int]? {
        guard let b = t.base, !slow.isEmpty else { return nil }
        if slowOnly || !t.isPlainASCII { return slow[t.string] }
        guard let bucket = slots[ByteTable.hash(t)] else { return nil }
        for e in bucket where e.key.count == t.count {
            if e.key.withUnsafeBufferPointer({ bytesEqual($0.baseAddress!, b, t.count) }) { return e.list }
        }
        return nil
    }

    /// `exact`: set false when the String table answered (components then still need comparing).
    func lookup(_ a: RawText, _ b: RawText, exact: inout Bool) -> [Int]? {
        guard let pa = a.base, let pb = b.base, !slow.isEmpty else { return nil }
        if slowOnly || !a.isPlainASCII || !b.isPlainASCII {
            exact = false
            return slow[a.string + "\u{0}" + b.string]
        }
        guard let bucket = slots[ByteTable.hash(a, b)] else { return nil }
        for e in bucket where e.split == a.count + 1 && e.key.count == a.count + 1 + b.count {
            let same = e.key.withUnsafeBufferPointer { k in
                bytesEqual(k.baseAddress!, pa, a.count) && bytesEqual(k.baseAddress! + e.split, pb, b.count)
            }
            if same { return e.list }
        }
        return nil
    }
}

@inline(__always)
func bytesEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    var i = 0
    while i < n {
        if a[i] != b[i] { return false }
        i &+= 1
    }
    return true
}

/// `t == s` as Strings (false when `t` is absent); byte comparison, String comparison only for non-ASCII.
@inline(__always)
func textEquals(_ t: RawText, _ s: String) -> Bool {
    guard let b = t.base else { return false }
    let r: Bool? = s.utf8.withContiguousStorageIfAvailable { u -> Bool? in
        if u.count == t.count && (u.count == 0 || bytesEqual(u.baseAddress!, b, u.count)) { return true }
        let ut = RawText(u.baseAddress, u.count)
        if t.isPlainASCII && ut.isPlainASCII { return false }
        return nil
    } ?? nil
    if let r { return r }
    return t.string == s
}

/// `Int(String)` over raw bytes: optional sign, decimal digits, nil on overflow or anything else.
func parseInt(_ b: UnsafePointer<UInt8>, _ n: Int) -> Int? {
    var i = 0
    var neg = false
    if n > 0 && (b[0] == 0x2B || b[0] == 0x2D) { neg = b[0] == 0x2D; i = 1 }
    guard i < n else { return nil }
    var v = 0
    while i < n {
        let c = b[i]
        guard c >= 0x30 && c <= 0x39 else { return nil }
        let (m, o1) = v.multipliedReportingOverflow(by: 10)
        let (s, o2) = neg ? m.subtractingReportingOverflow(Int(c - 0x30)) : m.addingReportingOverflow(Int(c - 0x30))
        if o1 || o2 { return nil }
        v = s
        i += 1
    }
    return v
}

/// `VersionCondition.parse` over raw bytes.
func parseVersion(_ t: RawText) -> [Int]? {
    guard let b = t.base, t.count > 0 else { return nil }
    var out: [Int] = []
    var v = 0, len = 0
    for i in 0...t.count {
        if i == t.count || b[i] == 0x2E {
            guard len > 0, len <= 9 else { return nil }
            out.append(v)
            v = 0; len = 0
            continue
        }
        let c = b[i]
        guard c >= 0x30 && c <= 0x39 else { return nil }
        v = v * 10 + Int(c - 0x30)
        len += 1
    }
    return out
}

extension RuleMatcher {
    /// Appends the rules the event of role `role` with raw facts `f` matches to `hits` (as `match(role:facts:into:)`).
    /// `buffer` is scratch space for identifiers.
    public func matchRaw(role: EventRole, facts f: RawFacts, into hits: inout [Int], buffer: inout [UInt8]) {
        let start = hits.count
        guard role != .other else { return }
        let page = f.page
        if page.isPresent && tables.ignored.lookup(page) != nil { return }
        var versionParsed = false
        var version: [Int]? = nil
        func versionHolds(_ conditions: [VersionCondition]) -> Bool {
            if conditions.isEmpty { return true }
            if !versionParsed {
                versionParsed = true
                if f.appVersion.isPresent {
                    version = parseVersion(f.appVersion)
                } else {
                    version = RuleMatcher.libAppVersion(f.lib).flatMap { VersionCondition.parse(Substring($0)) }
                }
            }
            guard let v = version else { return false }
            return conditions.allSatisfy { $0.holds(v) }
        }
        let pageCount = rules.pages.count, elementCount = rules.elements.count
        switch role {
        case .pageEnter:
            if page.isPresent, let list = tables.pageByScreen.lookup(page) {
                for i in list {
                    let r = rules.pages[i]
                    if let p = r.pagePath, !textEquals(f.pagePath, p) { continue }
                    if versionHolds(r.appVersions) { hits.append(i) }
                }
            }
            if f.pagePath.isPresent, let list = tables.pageByPath.lookup(f.pagePath) {
                for i in list where versionHolds(rules.pages[i].appVersions) { hits.append(i) }
            }
            if page.isPresent, let list = tables.pageActions.lookup(page) {
                for i in list { hits.append(pageCount + elementCount + i) }
            }
        case .click:
            var items: [(String, String)]? = nil
            var exact = true
            if f.elementPath.isPresent && f.elementType.isPresent, let list = tables.elementByKey.lookup(f.elementPath, f.elementType, exact: &exact) {
                for i in list where elementMatchesRaw(rules.elements[i], f, &items, keyChecked: exact) && versionHolds(rules.elements[i].appVersions) {
                    hits.append(pageCount + i)
                }
            }
            if !tables.regexRules.isEmpty {
                // `{$element_path}-{$element_type}({position})_[{content}]`, NUL-terminated.
                buffer.removeAll(keepingCapacity: true)
                func put(_ t: RawText) { if let b = t.base { buffer.append(contentsOf: UnsafeBufferPointer(start: b, count: t.count)) } }
                put(f.elementPath)
                buffer.append(0x2D)
                put(f.elementType)
                buffer.append(0x28)
                put(f.elementPosition.isPresent ? f.elementPosition : f.elementIndex)
                buffer.append(0x29); buffer.append(0x5F); buffer.append(0x5B)
                if f.content.isPresent { put(f.content) } else { buffer.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }
                buffer.append(0x5D)
                buffer.append(0)
                let length = buffer.firstIndex(of: 0)!
                buffer.withUnsafeBufferPointer { b in
                    b.withMemoryRebound(to: CChar.self) { c in
                        for (n, (i, re)) in tables.regexRules.enumerated() {
                            let affix = tables.regexAffixes[n]
                            if !affix.prefix.isEmpty {
                                guard length >= affix.prefix.count, bytesEqual(b.baseAddress!, affix.prefix, affix.prefix.count) else { continue }
                            }
                            if !affix.suffix.isEmpty {
                                guard length >= affix.suffix.count,
                                      bytesEqual(b.baseAddress! + length - affix.suffix.count, affix.suffix, affix.suffix.count) else { continue }
                            }
                            guard re.matches(cString: c.baseAddress!) else { continue }
                            let r = rules.elements[i]
                            if elementMatchesRaw(r, f, &items) && versionHolds(r.appVersions) { hits.append(pageCount + i) }
                        }
                    }
                }
            }
            if f.target.isPresent && !tables.clickActions.isEmpty {
                let tag = f.tag.isPresent ? f.tag : RawText(RuleMatcher.zero, 1)
                func lookup(_ kind: ActionKind, _ a: RawText, _ b: RawText, _ c: RawText = .absent) {
                    buffer.removeAll(keepingCapacity: true)
                    buffer.append(contentsOf: UnsafeBufferPointer(start: a.base, count: a.count))
                    buffer.append(0x2F)
                    buffer.append(contentsOf: UnsafeBufferPointer(start: b.base, count: b.count))
                    if c.isPresent {
                        buffer.append(0x2F)
                        buffer.append(contentsOf: UnsafeBufferPointer(start: c.base, count: c.count))
                    }
                    let list = buffer.withUnsafeBufferPointer { tables.clickActions.lookup(RawText($0.baseAddress ?? RuleMatcher.zero, $0.count)) }
                    guard let list else { return }
                    for i in list where rules.actions[i].kind == kind && !hits[start...].contains(pageCount + elementCount + i) {
                        hits.append(pageCount + elementCount + i)
                    }
                }
                let k = f.elementKind
                if textEquals(k, "control") {
                    if f.action.isPresent {
                        lookup(.action, f.target, f.action, tag)
                        lookup(.action, f.target, f.action)
                    }
                } else if textEquals(k, "gesture") {
                    if f.action.isPresent { lookup(.gesture, f.target, f.action) }
                } else if textEquals(k, "table") || textEquals(k, "collection") {
                    if f.container.isPresent { lookup(.tableView, f.target, f.container, tag) }
                }
            }
        case .other:
            break
        }
        if hits.count - start > 1 { hits[start...].sort() }
    }

    nonisolated(unsafe) private static let zero: UnsafePointer<UInt8> = {
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
        p.initialize(to: 0x30)
        return UnsafePointer(p)
    }()

    /// `elementMatches` over raw facts; `items` caches the composite content's items.
    /// `keyChecked`: path and type are known equal (found by them in the element table).
    func elementMatchesRaw(_ r: ElementRule, _ f: RawFacts, _ items: inout [(String, String)]?, keyChecked: Bool = false) -> Bool {
        if !keyChecked {
            if let p = r.path, !textEquals(f.elementPath, p) { return false }
            if let t = r.type, !textEquals(f.elementType, t) { return false }
        }
        if let s = r.screen, !textEquals(f.page, s) { return false }
        if let p = r.pagePath, !textEquals(f.pagePath, p) { return false }
        if let index = r.index {
            guard let b = f.elementIndex.base, parseInt(b, f.elementIndex.count) == index else { return false }
        }
        if r.section != nil || r.row != nil {
            guard let b = f.elementPosition.base else { return false }
            let n = f.elementPosition.count
            var dash = -1
            for i in 0..<n where b[i] == 0x2D { dash = i; break }
            guard dash >= 0, let s = parseInt(b, dash), let row = parseInt(b + dash + 1, n - dash - 1) else { return false }
            if let want = r.section, want != s { return false }
            if let want = r.row, want != row { return false }
        }
        if let key = r.contentKey {
            if items == nil { items = RuleMatcher.objectItems(f.contentObject) }
            guard let item = items!.first(where: { $0.0 == key })?.1 else { return false }
            if let want = r.content, want != item { return false }
        } else {
            if let want = r.content, !textEquals(f.content, want) { return false }
            if r.groupByContent && !f.content.isPresent { return false }
        }
        return true
    }

    /// The string members of an object value.
    static func objectItems(_ t: RawText) -> [(String, String)] {
        guard let base = t.base else { return [] }
        let b = UnsafeRawBufferPointer(start: base, count: t.count)
        return MiniJSON.members(b).compactMap { m in
            MiniJSON.string(UnsafeRawBufferPointer(rebasing: b[m.value])).map { (String(decoding: m.key, as: UTF8.self), $0) }
        }
    }

    /// `$app_version` inside the event's `lib` object.
    public static func libAppVersion(_ lib: RawText) -> String? {
        guard let base = lib.base, lib.count > 2 else { return nil }
        let b = UnsafeRawBufferPointer(start: base, count: lib.count)
        guard let r = MiniJSON.members(b).first(where: { $0.key == Array("$app_version".utf8) })?.value else { return nil }
        return MiniJSON.string(UnsafeRawBufferPointer(rebasing: b[r]))
    }

    /// Appends the JSON string of the hit's id.
    public func appendID(of hit: Int, to out: inout [UInt8]) {
        out.append(contentsOf: tables.idJSON[hit])
    }
}

/// The matcher's byte-keyed tables, built at load time.
struct RawTables: Sendable {
    var ignored: ByteTable
    var pageByScreen: ByteTable
    var pageByPath: ByteTable
    var pageActions: ByteTable
    var clickActions: ByteTable
    var elementByKey: ByteTable
    var regexRules: [(Int, PosixRegex)]
    /// Per regex rule: literal bytes every match starts / ends with (empty when unknown).
    var regexAffixes: [(prefix: [UInt8], suffix: [UInt8])]
    var idJSON: [[UInt8]]
}

/// Literal bytes every match of a POSIX extended regex must start / end with (a cheap reject before `regexec`).
/// Conservative: patterns with bracket expressions or alternation get none.
func regexAffixes(_ pattern: String) -> (prefix: [UInt8], suffix: [UInt8]) {
    enum Token: Equatable { case literal(UInt8), special(UInt8), other }
    let special: Set<UInt8> = Set(".[](){}*+?|^$\\".utf8)
    var tokens: [Token] = []
    let b = Array(pattern.utf8)
    var i = 0
    while i < b.count {
        let c = b[i]
        if c == 0x5C {
            guard i + 1 < b.count else { return ([], []) }
            tokens.append(special.contains(b[i + 1]) ? .literal(b[i + 1]) : .other)
            i += 2
            continue
        }
        if c == 0x5B || c == 0x7C { return ([], []) }
        if special.contains(c) { tokens.append(.special(c)) } else if c >= 0x20 && c < 0x7F { tokens.append(.literal(c)) } else { tokens.append(.other) }
        i += 1
    }
    var prefix: [UInt8] = []
    if tokens.first == .special(0x5E) {
        var k = 1
        while k < tokens.count, case .literal(let c) = tokens[k] { prefix.append(c); k += 1 }
        if k < tokens.count, case .special(let q) = tokens[k], q == 0x2A || q == 0x3F || q == 0x7B, !prefix.isEmpty { prefix.removeLast() }
    }
    var suffix: [UInt8] = []
    if tokens.count > 1 && tokens.last == .special(0x24) {
        var k = tokens.count - 2
        while k >= 0, case .literal(let c) = tokens[k] { suffix.append(c); k -= 1 }
        suffix.reverse()
    }
    return (prefix, suffix)
}
