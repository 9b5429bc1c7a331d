import MaidianEvents
import MaidianPipeline
import MaidianRules

/// Matches page-enter and click events against the rules file (SPEC sections 3 and 4) and adds
/// `$matched_rules` plus the `userDefined` and `pagePara` values of matched action rules to `properties`.
/// Client properties are never overwritten.
public final class MatchStage: Stage {
    /// The stage's options.
    public struct Config: Decodable, Sendable {
        /// The rules file (YAML or JSON), relative to the pipeline file.
        public var rules: String
        /// Options.
        public init(rules: String) { self.rules = rules }
    }

    public static let kind = "match"
    public static let summary = "match page views and clicks against circle-select rules; add $matched_rules and action parameters"

    /// The compiled rules.
    public let matcher: RuleMatcher
    private let matchedCounter: StageCounter
    private var hits: [Int] = []
    private var addedNames: [[UInt8]] = []
    private var found = [Int](repeating: -1, count: 15)
    private var buffer: [UInt8] = []

    /// Loads and compiles the rules file.
    public init(config: Config, context: StageContext) throws {
        let rules = try RulesFile.load(path: context.resolvePath(config.rules))
        matcher = try RuleMatcher(rules: rules)
        matchedCounter = context.counter("matched")
    }

    /// Builds the stage from already loaded rules (tests).
    public init(matcher: RuleMatcher, context: StageContext) {
        self.matcher = matcher
        matchedCounter = context.counter("matched")
    }

    // Property names read per event, compared by length first.
    private static let names: [[UInt8]] = [
        "$screen_name", "current_url", "$page_path", "$app_version", "$element_path", "$element_type",
        "$element_position", "$element_index", "$element_content", "$element_kind", "$element_target",
        "$element_action", "$element_container", "$element_tag", "$matched_rules",
    ].map { Array($0.utf8) }

    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        if matcher.isEmpty { return }
        for i in batch.events.indices {
            let ev = batch.events[i]
            guard ev.isLive, ev.type.isTrack, ev.eventName.isPresent else { continue }
            let role = Self.role(batch, ev.eventName)
            if role == .other { continue }
            found.withUnsafeMutableBufferPointer { for k in $0.indices { $0[k] = -1 } }
            Self.findProperties(batch, ev, &found)
            hits.removeAll(keepingCapacity: true)
            if Self.needsDecoding(batch, found, role) {
                if !slowMatch(batch, ev, role) { continue }
            } else {
                fastMatch(batch, ev, role)
            }
            if hits.isEmpty { continue }
            matchedCounter.add()
            addedNames.removeAll(keepingCapacity: true)
            if found[14] < 0 {
                let start = batch.scratch.count
                JSONOut.appendRaw("\"$matched_rules\":[", to: &batch.scratch)
                for n in hits.indices {
                    if n > 0 { batch.scratch.append(0x2C) }
                    matcher.appendID(of: hits[n], to: &batch.scratch)
                }
                batch.scratch.append(0x5D)
                batch.linkAdded(event: i, Span(start, batch.scratch.count))
            }
            for h in hits {
                guard let action = matcher.action(of: h) else { continue }
                for (key, value) in action.userDefined {
                    let name = Array(key.utf8)
                    if addedNames.contains(name) || Self.propertyIndex(batch, ev, name) != nil { continue }
                    addedNames.append(name)
                    let start = batch.scratch.count
                    JSONOut.appendString(key, to: &batch.scratch)
                    batch.scratch.append(0x3A)
                    JSONOut.appendString(value, to: &batch.scratch)
                    batch.linkAdded(event: i, Span(start, batch.scratch.count))
                }
                for param in action.pagePara {
                    let name = Array(param.output.utf8)
                    if addedNames.contains(name) || Self.propertyIndex(batch, ev, name) != nil { continue }
                    guard let value = Self.parameterValue(batch, ev, param, contentIndex: found[8]) else { continue }
                    addedNames.append(name)
                    let start = batch.scratch.count
                    JSONOut.appendString(param.output, to: &batch.scratch)
                    batch.scratch.append(0x3A)
                    batch.scratch.append(contentsOf: value)
                    batch.linkAdded(event: i, Span(start, batch.scratch.count))
                }
            }
        }
    }

    /// The matcher over decoded Strings (escaped or replaced values); false when the page is ignored.
    private func slowMatch(_ batch: borrowing EventBatch, _ ev: Event, _ role: EventRole) -> Bool {
            var f = EventFacts()
        f.screenName = Self.text(batch, found[0])
        f.currentURL = Self.text(batch, found[1])
        if matcher.isIgnored(page: f.page) { return false }
        f.pagePath = Self.text(batch, found[2])
        f.appVersion = Self.text(batch, found[3]) ?? Self.libAppVersion(batch, ev.lib)
        if role == .click {
            f.elementPath = Self.text(batch, found[4])
            f.elementType = Self.text(batch, found[5])
            f.elementPosition = Self.text(batch, found[6])
            f.elementIndex = Self.text(batch, found[7])
            if found[8] >= 0 {
                let p = batch.properties[found[8]]
                if p.kind == .string { f.content = Self.text(batch, found[8]) } else if p.kind == .object && p.fix == .keep {
                    f.contentItems = Self.objectItems(batch, p.value)
                }
            }
            f.elementKind = Self.text(batch, found[9])
            f.target = Self.text(batch, found[10])
            f.action = Self.text(batch, found[11])
            f.container = Self.text(batch, found[12])
            f.tag = Self.text(batch, found[13])
        }
        matcher.match(role: role, facts: f, into: &hits)
        return true
    }

    /// The matcher over raw bytes (no string has escapes or replacements).
    private func fastMatch(_ batch: borrowing EventBatch, _ ev: Event, _ role: EventRole) {
        let found = self.found  // a local: no dynamic exclusivity check per property read
        batch.json.withUnsafeBufferPointer { j in
            let base = j.baseAddress!
            func raw(_ n: Int) -> RawText {
                let k = found[n]
                guard k >= 0 else { return .absent }
                let p = batch.properties[k]
                switch p.kind {
                case .string: return RawText(base + Int(p.value.start) + 1, p.value.count - 2)
                case .number, .bool: return RawText(base + Int(p.value.start), p.value.count)
                default: return .absent
                }
            }
            var f = RawFacts()
            f.screenName = raw(0)
            f.currentURL = raw(1)
            f.pagePath = raw(2)
            f.appVersion = raw(3)
            if ev.lib.isPresent { f.lib = RawText(base + Int(ev.lib.start), ev.lib.count) }
            if role == .click {
                f.elementPath = raw(4)
                f.elementType = raw(5)
                f.elementPosition = raw(6)
                f.elementIndex = raw(7)
                if found[8] >= 0 {
                    let p = batch.properties[found[8]]
                    if p.kind == .string { f.content = raw(8) } else if p.kind == .object && p.fix == .keep {
                        f.contentObject = RawText(base + Int(p.value.start), p.value.count)
                    }
                }
                f.elementKind = raw(9)
                f.target = raw(10)
                f.action = raw(11)
                f.container = raw(12)
                f.tag = raw(13)
            }
            matcher.matchRaw(role: role, facts: f, into: &hits, buffer: &buffer)
        }
    }

    /// Whether a string property the matcher reads is escaped or replaced (then Strings are decoded).
    static func needsDecoding(_ batch: borrowing EventBatch, _ found: [Int], _ role: EventRole) -> Bool {
        for n in 0..<(role == .click ? 14 : 4) {
            let k = found[n]
            guard k >= 0 else { continue }
            let p = batch.properties[k]
            if p.kind == .string && (p.fix == .replace || p.valueEscaped) { return true }
        }
        return false
    }

    static func role(_ batch: borrowing EventBatch, _ name: Span) -> EventRole {
        func equal(_ s: StaticString) -> Bool {
            guard name.count == s.utf8CodeUnitCount else { return false }
            let lo = Int(name.start)
            for k in 0..<name.count where batch.json[lo + k] != s.utf8Start[k] { return false }
            return true
        }
        if equal("$AppClick") { return .click }
        if equal("$AppViewScreen") || equal("enter_view") { return .pageEnter }
        return .other
    }

    /// `names` flattened and grouped by length: entry `e` of `order[lengthStart[c]..<lengthStart[c + 1]]` is the
    /// index of a name of length `c`; `offsets[n]` is where name `n` starts in `flat`.
    private static let flat: [UInt8] = names.flatMap { $0 }
    private static let offsets: [Int] = names.indices.map { n in names[..<n].reduce(0) { $0 + $1.count } }
    private static let order: [Int] = names.indices.sorted { names[$0].count < names[$1].count }
    private static let lengthStart: [Int] = (0...19).map { c in names.filter { $0.count < c }.count }

    /// One pass over the event's kept properties: the index of each of `names`.
    static func findProperties(_ batch: borrowing EventBatch, _ ev: Event, _ found: inout [Int]) {
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        let flat = Self.flat, offsets = Self.offsets, order = Self.order, lengthStart = Self.lengthStart
        batch.json.withUnsafeBufferPointer { j in
            batch.properties.withUnsafeBufferPointer { props in
                flat.withUnsafeBufferPointer { fb in
                    found.withUnsafeMutableBufferPointer { f in
                        for k in lo..<hi {
                            let p = props[k]
                            guard p.fix != .drop else { continue }
                            let c = p.name.count
                            guard c >= 10 && c <= 18 else { continue }
                            let name = j.baseAddress! + Int(p.name.start)
                            for e in lengthStart[c]..<lengthStart[c + 1] {
                                let n = order[e]
                                if f[n] < 0 && memcmpEqual(name, fb.baseAddress! + offsets[n], c) {
                                    f[n] = k
                                    break
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    static func propertyIndex(_ batch: borrowing EventBatch, _ ev: Event, _ name: [UInt8]) -> Int? {
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        return batch.json.withUnsafeBufferPointer { j -> Int? in
            name.withUnsafeBufferPointer { n -> Int? in
                for k in lo..<hi {
                    let p = batch.properties[k]
                    if p.fix != .drop && p.name.count == n.count && memcmpEqual(j.baseAddress! + Int(p.name.start), n.baseAddress!, n.count) { return k }
                }
                return nil
            }
        }
    }

    /// The value bytes of a kept property (its replacement when fixed).
    static func valueBytes(_ batch: borrowing EventBatch, _ k: Int) -> [UInt8] {
        let p = batch.properties[k]
        if p.fix == .replace { return Array(batch.scratch[Int(p.replacement.start)..<Int(p.replacement.end)]) }
        return Array(batch.json[Int(p.value.start)..<Int(p.value.end)])
    }

    /// A string property's text, or a number's/bool's text as written; nil otherwise.
    static func text(_ batch: borrowing EventBatch, _ k: Int) -> String? {
        guard k >= 0 else { return nil }
        let p = batch.properties[k]
        switch p.kind {
        case .string:
            if p.fix == .replace || p.valueEscaped {
                return valueBytes(batch, k).withUnsafeBytes { MiniJSON.string($0) }
            }
            return String(decoding: batch.json[Int(p.value.start + 1)..<Int(p.value.end - 1)], as: UTF8.self)
        case .number, .bool:
            return String(decoding: batch.json[Int(p.value.start)..<Int(p.value.end)], as: UTF8.self)
        default:
            return nil
        }
    }

    static func objectItems(_ batch: borrowing EventBatch, _ value: Span) -> [(String, String)] {
        batch.json.withUnsafeBytes { j in
            let b = UnsafeRawBufferPointer(rebasing: j[Int(value.start)..<Int(value.end)])
            return MiniJSON.members(b).compactMap { m in
                MiniJSON.string(UnsafeRawBufferPointer(rebasing: b[m.value])).map { (String(decoding: m.key, as: UTF8.self), $0) }
            }
        }
    }

    /// `$app_version` inside the event's `lib` object.
    static func libAppVersion(_ batch: borrowing EventBatch, _ lib: Span) -> String? {
        guard lib.isPresent, lib.count > 2 else { return nil }
        return batch.json.withUnsafeBytes { j in
            let b = UnsafeRawBufferPointer(rebasing: j[Int(lib.start)..<Int(lib.end)])
            guard let r = MiniJSON.members(b).first(where: { $0.key == Array("$app_version".utf8) })?.value else { return nil }
            return MiniJSON.string(UnsafeRawBufferPointer(rebasing: b[r]))
        }
    }

    /// The JSON value a `pagePara` entry reads from the event (SPEC section 4), or nil.
    static func parameterValue(_ batch: borrowing EventBatch, _ ev: Event, _ param: PageParameter, contentIndex: Int) -> [UInt8]? {
        func inObject(_ k: Int, _ key: [UInt8], depthFirst: Bool) -> [UInt8]? {
            let p = batch.properties[k]
            guard p.kind == .object, p.fix == .keep else { return nil }
            let bytes = valueBytes(batch, k)
            return bytes.withUnsafeBytes { b -> [UInt8]? in
                if depthFirst { return MiniJSON.findDepthFirst(key, in: b).map { Array(b[$0]) } }
                return MiniJSON.members(b).first(where: { $0.key == key }).map { Array(b[$0.value]) }
            }
        }
        if !param.propertyPath.isEmpty {
            let parts = param.propertyPath.split(separator: "/", maxSplits: 1)
            guard parts.count == 2, let k = propertyIndex(batch, ev, Array(parts[0].utf8)) else { return nil }
            return inObject(k, Array(parts[1].utf8), depthFirst: false)
        }
        let name = Array(param.propertyName.utf8)
        if param.containIn == "1" {
            return contentIndex >= 0 ? inObject(contentIndex, name, depthFirst: true) : nil
        }
        if let k = propertyIndex(batch, ev, name) { return valueBytes(batch, k) }
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        for k in lo..<hi where batch.properties[k].kind == .object && batch.properties[k].fix == .keep {
            if let v = inObject(k, name, depthFirst: true) { return v }
        }
        return nil
    }
}

@inline(__always)
private func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    var i = 0
    // 8 bytes at a time: the names looked for are 10 to 18 bytes.
    while i &+ 8 <= n {
        if UnsafeRawPointer(a).loadUnaligned(fromByteOffset: i, as: UInt64.self)
            != UnsafeRawPointer(b).loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
        i &+= 8
    }
    while i < n {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}
