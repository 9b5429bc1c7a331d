import MaidianEvents

extension [UInt8] {
    /// Writes the pieces one after the other at the start (growing the array when needed, never shrinking it:
    /// the caller's buffer is reused); returns the length written. Absent pieces write nothing.
    @inline(__always)
    mutating func write(_ p0: ByteView, _ p1: ByteView, _ p2: ByteView, _ p3: ByteView = .absent, _ p4: ByteView = .absent,
                        _ p5: ByteView = .absent, _ p6: ByteView = .absent, _ p7: ByteView = .absent) -> Int {
        let n = p0.count + p1.count + p2.count + p3.count + p4.count + p5.count + p6.count + p7.count
        if count < n { append(contentsOf: repeatElement(0, count: n - count)) }
        withUnsafeMutableBufferPointer { out in
            var at = out.baseAddress!
            @inline(__always) func put(_ t: ByteView) {
                if let b = t.start { at.update(from: b, count: t.count) }
                at += t.count
            }
            put(p0); put(p1); put(p2); put(p3); put(p4); put(p5); put(p6); put(p7)
        }
        return n
    }
}

/// `EventFacts` as raw bytes into the batch (valid while the matcher runs): no allocation on the common path.
public struct RawFacts {
    /// `$screen_name`, `current_url`, `$page_path`: string content as sent, a number or bool as written; else absent.
    public var screenName = ByteView.absent, currentURL = ByteView.absent, pagePath = ByteView.absent
    /// `$app_version` from the properties (`lib` is read when it is absent).
    public var appVersion = ByteView.absent
    /// The event's `lib` object (for `$app_version` when the properties have none).
    public var lib = ByteView.absent
    /// `$element_path`, `$element_type` (clicks only).
    public var elementPath = ByteView.absent, elementType = ByteView.absent
    /// `$element_position` (`section-row`) and `$element_index` as written (clicks only).
    public var elementPosition = ByteView.absent, elementIndex = ByteView.absent
    /// `$element_content` when it is a string.
    public var content = ByteView.absent
    /// `$element_content`'s whole value when it is a kept object.
    public var contentObject = ByteView.absent
    /// `$element_kind`, `$element_target`, `$element_action` (clicks only).
    public var elementKind = ByteView.absent, target = ByteView.absent, action = ByteView.absent
    /// `$element_container`, `$element_tag` (clicks only).
    public var container = ByteView.absent, tag = ByteView.absent
    /// Every fact absent.
    public init() {}
    /// The page: `$screen_name`, else `current_url`.
    @inlinable public var page: ByteView { screenName.isPresent ? screenName : currentURL }
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

/// A dotted version parsed without allocating (up to 8 parts; longer ones keep an array).
struct ParsedVersion {
    private var inline: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
    private var long: [Int]?

    /// `VersionCondition.parse` over raw bytes: nil unless every dot-separated part is 1 to 9 digits.
    init?(_ t: ByteView) {
        guard let b = t.start, t.count > 0 else { return nil }
        var parts = 0
        var v = 0, len = 0
        for i in 0...t.count {
            if i == t.count || b[i] == 0x2E {
                guard len > 0, len <= 9 else { return nil }
                if parts < 8 {
                    withUnsafeMutableBytes(of: &inline) { $0.storeBytes(of: v, toByteOffset: parts * MemoryLayout<Int>.stride, as: Int.self) }
                } else {
                    if long == nil { long = withUnsafeBytes(of: inline) { Array($0.bindMemory(to: Int.self)) } }
                    long!.append(v)
                }
                parts += 1
                v = 0; len = 0
                continue
            }
            let c = b[i]
            guard c >= 0x30 && c <= 0x39 else { return nil }
            v = v * 10 + Int(c - 0x30)
            len += 1
        }
    }

    /// Whether `c` holds, comparing as `VersionCondition.compare` (missing parts count as 0).
    func satisfies(_ c: VersionCondition) -> Bool {
        if let long { return c.holds(long) }
        var order = 0
        withUnsafeBytes(of: inline) { raw in
            let mine = raw.bindMemory(to: Int.self)
            for i in 0..<max(8, c.parts.count) {
                let x = i < 8 ? mine[i] : 0, y = i < c.parts.count ? c.parts[i] : 0
                if x != y { order = x < y ? -1 : 1; return }
            }
        }
        return c.holds(order: order)
    }
}

/// A click's numeric element fields, parsed once.
struct ClickNumbers {
    var index: Int?, section: Int?, row: Int?

    init(_ f: RawFacts) {
        if let b = f.elementIndex.start { index = parseInt(b, f.elementIndex.count) }
        // `section-row`: split at the first dash.
        if let b = f.elementPosition.start {
            let n = f.elementPosition.count
            var dash = -1
            for i in 0..<n where b[i] == 0x2D { dash = i; break }
            if dash >= 0, let s = parseInt(b, dash), let r = parseInt(b + dash + 1, n - dash - 1) {
                section = s
                row = r
            }
        }
    }
}

/// The app version of one event, parsed on first use: `$app_version`, else `lib`'s.
struct LazyVersion {
    let facts: RawFacts
    private var parsed = false
    private var version: ParsedVersion?

    init(_ f: RawFacts) { facts = f }

    /// Whether every condition holds (an empty list always does; an event without a version satisfies none).
    mutating func holds(_ conditions: [VersionCondition]) -> Bool {
        if conditions.isEmpty { return true }
        if !parsed {
            parsed = true
            if facts.appVersion.isPresent {
                version = ParsedVersion(facts.appVersion)
            } else if var text = RuleMatcher.libAppVersion(facts.lib) {
                version = text.withUTF8 { ParsedVersion(ByteView($0.baseAddress ?? emptyBytes, $0.count)) }
            }
        }
        guard let v = version else { return false }
        return conditions.allSatisfy { v.satisfies($0) }
    }
}

/// The string members of a click's composite `$element_content` (the first of each key) as string numbers
/// (`StringTable`); members whose key no rule names are left out.
struct ContentItems {
    var pairs: UnsafeMutablePointer<(key: Int32, value: Int32)>?
    var count = 0

    static var none: ContentItems { ContentItems(pairs: nil) }

    /// The value's number of item `key` (-1: a value no rule names), or nil without such an item.
    @inline(__always)
    func value(_ key: Int32) -> Int32? {
        guard let pairs else { return nil }
        for i in 0..<count where pairs[i].key == key { return pairs[i].value }
        return nil
    }

    /// Parses the object `object` (validated JSON) for the duration of `body`.
    static func with<R>(_ object: ByteView, _ strings: StringTable, _ body: (ContentItems) -> R) -> R {
        guard let base = object.start else { return body(.none) }
        let n = object.count
        // A member takes at least 6 bytes (`"":"",`).
        return withUnsafeTemporaryAllocation(of: (key: Int32, value: Int32).self, capacity: n / 6 + 1) { pairs in
            var items = ContentItems(pairs: pairs.baseAddress!)
            let b = UnsafeRawBufferPointer(start: base, count: n)
            func id(_ lo: Int, _ hi: Int) -> Int32 {
                for k in lo..<hi where b[k] == 0x5C {
                    let decoded = unescapeJSONString(UnsafeRawBufferPointer(rebasing: b[lo..<hi]))
                    return decoded.withUnsafeBufferPointer { strings.id(ByteView($0.baseAddress ?? emptyBytes, $0.count)) }
                }
                return strings.id(ByteView(base + lo, hi - lo))
            }
            JSONMembers.forEach(in: b) { key, escaped, value in
                let keyStart = key.baseAddress! - b.baseAddress!
                let k = escaped ? id(keyStart, keyStart + key.count) : strings.id(ByteView(base + keyStart, key.count))
                if b[value.lowerBound] == 0x22, k >= 0, items.value(k) == nil {
                    (pairs.baseAddress! + items.count).initialize(to: (k, id(value.lowerBound + 1, value.upperBound - 1)))
                    items.count += 1
                }
                return items.count < pairs.count
            }
            return body(items)
        }
    }
}

extension RuleMatcher {
    /// Appends the rules the event of role `role` with raw facts `f` matches to `hits`, in rule order (pages,
    /// elements, actions). `buffer` is scratch space for identifiers.
    public func matchRaw(role: EventRole, facts f: RawFacts, into hits: inout [Int], buffer: inout [UInt8]) {
        let start = hits.count
        guard role != .other else { return }
        let page = f.page
        if page.isPresent && isIgnoredRaw(page) { return }
        var version = LazyVersion(f)
        switch role {
        case .pageEnter:
            matchPage(f, page, &version, &hits)
        case .click:
            matchClick(f, page, &version, &hits, &buffer)
        case .other:
            break
        }
        if hits.count - start > 1 {
            // In place (sorting `hits[start...]` would copy it): insertion sort, as hits come nearly in order.
            hits.withUnsafeMutableBufferPointer { h in
                for i in (start + 1)..<h.count {
                    let v = h[i]
                    var j = i
                    while j > start && h[j - 1] > v { h[j] = h[j - 1]; j -= 1 }
                    h[j] = v
                }
            }
            // An event that matches several drawings of one rule (`any_of`) matches the rule once.
            var kept = start + 1
            for i in (start + 1)..<hits.count where hits[i] != hits[kept - 1] {
                hits[kept] = hits[i]
                kept += 1
            }
            if kept < hits.count { hits.removeLast(hits.count - kept) }
        }
    }

    func isIgnoredRaw(_ page: ByteView) -> Bool {
        for i in index.ignored.lookup(keyHash(.ignored, page)) where page.sameText(index.ignoredPages[Int(index.ignored.rules[i])]) {
            return true
        }
        return false
    }

    private func matchPage(_ f: RawFacts, _ page: ByteView, _ version: inout LazyVersion, _ hits: inout [Int]) {
        if page.isPresent {
            for k in index.pageByScreen.lookup(keyHash(.screen, page)) {
                let i = Int(index.pageByScreen.rules[k])
                guard let s = index.pageScreens[i], page.sameText(s) else { continue }
                if let p = index.pagePaths[i], !f.pagePath.sameText(p) { continue }
                if version.holds(index.pageVersions[i]) { hits.append(index.pageOwner[i]) }
            }
        }
        if f.pagePath.isPresent {
            for k in index.pageByPath.lookup(keyHash(.pagePath, f.pagePath)) {
                let i = Int(index.pageByPath.rules[k])
                guard let p = index.pagePaths[i], f.pagePath.sameText(p) else { continue }
                if version.holds(index.pageVersions[i]) { hits.append(index.pageOwner[i]) }
            }
            if index.pagePathRegexes.count > 0, let p = f.pagePath.start {
                index.pagePathRegexes.forEachMatch(UnsafeRawBufferPointer(start: p, count: f.pagePath.count)) { r in
                    let i = index.pagePathRegexRules[r]
                    if version.holds(index.pageVersions[i]) { hits.append(index.pageOwner[i]) }
                }
            }
        }
        if page.isPresent {
            let offset = rules.pages.count + rules.elements.count
            for k in index.pagePV.lookup(keyHash(.pagePV, page)) {
                let i = Int(index.pagePV.rules[k])
                if page.sameText(index.actionIDs[i]) && version.holds(index.actionVersions[i]) { hits.append(offset + i) }
            }
        }
    }

    private func matchClick(_ f: RawFacts, _ page: ByteView, _ version: inout LazyVersion, _ hits: inout [Int], _ buffer: inout [UInt8]) {
        var ev = ElementFields()
        // Which masks the rules of this path and type use (none: only regex rules can match).
        var masks: UInt64 = 0
        if !index.elements.isEmpty {
            ev.path = index.strings.id(f.elementPath)
            ev.type = index.strings.id(f.elementType)
            if ev.path >= 0 && ev.type >= 0 { masks = index.masksByPathType.get(ev.pathType).map { UInt64(bitPattern: $0) } ?? 0 }
        }
        if masks != 0 || index.regexes.count > 0 {
            // Content items are parsed only when a candidate rule reads them.
            if f.contentObject.isPresent && (masks & index.itemMaskBits != 0 || index.regexUsesItems) {
                ContentItems.with(f.contentObject, index.strings) { items in
                    matchElements(f, page, items, &ev, masks, &version, &hits, &buffer)
                }
            } else {
                matchElements(f, page, .none, &ev, masks, &version, &hits, &buffer)
            }
        }
        if f.target.isPresent && !index.clickActions.isEmpty { matchActions(f, &version, &hits, &buffer) }
    }

    private func matchElements(_ f: RawFacts, _ page: ByteView, _ items: ContentItems, _ ev: inout ElementFields, _ masks: UInt64,
                               _ version: inout LazyVersion, _ hits: inout [Int], _ buffer: inout [UInt8]) {
        let pageCount = rules.pages.count
        if index.elements.isEmpty {
            ev.path = index.strings.id(f.elementPath)
            ev.type = index.strings.id(f.elementType)
        }
        ev.page = index.strings.id(page)
        ev.pagePath = index.strings.id(f.pagePath)
        ev.content = index.strings.id(f.content)
        let numbers = ClickNumbers(f)
        ev.index = numbers.index; ev.section = numbers.section; ev.row = numbers.row
        let hasContent = f.content.isPresent
        func check(_ e: Int) {
            if elementMatches(e, ev, hasContent, items) && (!index.elementChecks[e].hasVersions || version.holds(index.elementVersions[e])) {
                hits.append(pageCount + Int(index.elementOwner[e]))
            }
        }
        if masks != 0 {
            func candidates(_ key: UInt64) {
                for k in index.elements.lookup(key) { check(Int(index.elements.rules[k])) }
            }
            var plain = masks & ~index.itemMaskBits
            while plain != 0 {
                let m = plain.trailingZeroBitCount
                plain &= plain &- 1
                if let key = ev.key(index.masks[m]) { candidates(key) }
            }
            if masks & index.itemMaskBits != 0, let pairs = items.pairs {
                for n in 0..<items.count {
                    ev.itemKey = pairs[n].key
                    ev.itemValue = pairs[n].value
                    var withItem = masks & index.itemMaskBits
                    while withItem != 0 {
                        let m = withItem.trailingZeroBitCount
                        withItem &= withItem &- 1
                        if let key = ev.key(index.masks[m]) { candidates(key) }
                    }
                }
            }
        }
        if index.regexes.count > 0 {
            // `{$element_path}-{$element_type}({position})_[{content}]`
            let position = f.elementPosition.isPresent ? f.elementPosition : f.elementIndex
            let content = f.content.isPresent ? f.content : ByteView(RuleMatcher.null, 4)
            let n = buffer.write(f.elementPath, RuleMatcher.dash, f.elementType, RuleMatcher.open, position, RuleMatcher.close, content, RuleMatcher.end)
            buffer.withUnsafeBytes { b in
                index.regexes.forEachMatch(UnsafeRawBufferPointer(rebasing: b[0..<n])) { r in check(index.regexRules[r]) }
            }
        }
    }

    /// ACTION, GESTURE and TABLEVIEW rules by the click's action identifiers (wire format §3).
    private func matchActions(_ f: RawFacts, _ version: inout LazyVersion, _ hits: inout [Int], _ buffer: inout [UInt8]) {
        let offset = rules.pages.count + rules.elements.count
        let tag = f.tag.isPresent ? f.tag : ByteView(RuleMatcher.zero, 1)
        func lookup(_ kind: ActionKind, _ a: ByteView, _ b: ByteView, _ c: ByteView = .absent) {
            let n = c.isPresent ? buffer.write(a, RuleMatcher.slash, b, RuleMatcher.slash, c) : buffer.write(a, RuleMatcher.slash, b)
            buffer.withUnsafeBufferPointer { id in
                let t = ByteView(id.baseAddress ?? emptyBytes, n)
                for k in index.clickActions.lookup(keyHash(kind.tag, t)) {
                    let i = Int(index.clickActions.rules[k])
                    if index.actionKinds[i] == kind && t.sameText(index.actionIDs[i]) && version.holds(index.actionVersions[i]) { hits.append(offset + i) }
                }
            }
        }
        let k = f.elementKind
        if k.sameText(RuleMatcher.control) {
            if f.action.isPresent {
                lookup(.action, f.target, f.action, tag)
                lookup(.action, f.target, f.action)
            }
        } else if k.sameText(RuleMatcher.gesture) {
            if f.action.isPresent { lookup(.gesture, f.target, f.action) }
        } else if k.sameText(RuleMatcher.table) || k.sameText(RuleMatcher.collection) {
            if f.container.isPresent { lookup(.tableView, f.target, f.container, tag) }
        }
    }

    private static let control = Array("control".utf8), gesture = Array("gesture".utf8)
    private static let table = Array("table".utf8), collection = Array("collection".utf8)

    /// Constant pieces of identifiers, in memory that lives as long as the process.
    nonisolated(unsafe) private static let constants: UnsafePointer<UInt8> = {
        let bytes = Array("0null/-(" .utf8) + Array(")_[]".utf8)
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count)
        p.initialize(from: bytes, count: bytes.count)
        return UnsafePointer(p)
    }()
    private static var zero: UnsafePointer<UInt8> { constants }
    private static var null: UnsafePointer<UInt8> { constants + 1 }
    private static var slash: ByteView { ByteView(constants + 5, 1) }
    private static var dash: ByteView { ByteView(constants + 6, 1) }
    private static var open: ByteView { ByteView(constants + 7, 1) }
    private static var close: ByteView { ByteView(constants + 8, 3) }
    private static var end: ByteView { ByteView(constants + 11, 1) }

    /// Every condition of element rule `e` but its versions, checked exactly (on string numbers).
    @inline(__always)
    func elementMatches(_ e: Int, _ ev: ElementFields, _ hasContent: Bool, _ items: ContentItems) -> Bool {
        index.elementChecks.withUnsafeBufferPointer { checks in
            let c = checks[e]
            if c.path >= 0 && c.path != ev.path { return false }
            if c.type >= 0 && c.type != ev.type { return false }
            let m = c.mask
            if m.contains(.screen) && c.screen != ev.page { return false }
            if m.contains(.pagePath) && c.pagePath != ev.pagePath { return false }
            if m.contains(.index) && ev.index != c.index { return false }
            if m.contains(.section) && ev.section != c.section { return false }
            if m.contains(.row) && ev.row != c.row { return false }
            if c.contentKey >= 0 {
                guard let value = items.value(c.contentKey) else { return false }
                if m.contains(.itemValue) && value != c.content { return false }
            } else {
                if m.contains(.content) && ev.content != c.content { return false }
                if c.groupByContent && !hasContent { return false }
            }
            return true
        }
    }

    /// `$app_version` inside the event's `lib` object.
    public static func libAppVersion(_ lib: ByteView) -> String? {
        guard let base = lib.start, lib.count > 2 else { return nil }
        let b = UnsafeRawBufferPointer(start: base, count: lib.count)
        guard let r = appVersionName.withUnsafeBytes({ JSONMembers.member($0, in: b) }) else { return nil }
        return JSONMembers.string(UnsafeRawBufferPointer(rebasing: b[r]))
    }

    /// Appends the JSON string of the hit's id.
    public func appendID(of hit: Int, to out: inout [UInt8]) {
        let (start, end) = (Int(outputs.hits[hit].idStart), Int(outputs.hits[hit].idEnd))
        outputs.bytes.withUnsafeBufferPointer { out.append(contentsOf: UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }
}
