import Foundation
import MaidianEvents
import MaidianPipeline
import MaidianRecording
@testable import MaidianRules
@testable import MaidianTools
import XCTest

/// The rules sets `maidian bench-match` generates, checked without timing: they load, and the indexed matcher
/// with its one multi-pattern regex scan finds what trying every rule (and every regex) one by one finds.
final class RuleSetGeneratorTests: XCTestCase {
    /// Page views and clicks of `testdata/traffic/sample.ndjson`, decoded.
    static let sample: [(EventRole, EventFacts)] = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../testdata/traffic/sample.ndjson").standardized.path
        guard let records = try? Recording.read(path: path) else { return [] }
        var out: [(EventRole, EventFacts)] = []
        let decoder = RecordDecoder()
        var batch = EventBatch()
        for chunk in stride(from: 0, to: records.count, by: 1000) {
            batch.reset()
            for (n, r) in records[chunk..<min(chunk + 1000, records.count)].enumerated() {
                r.value.withUnsafeBytes { v in
                    batch.appendRecord(topic: 0, partition: 0, offset: Int64(chunk + n), timestamp: 0, key: nil, value: v,
                                       ip: nil, receivedAt: nil, ua: nil, project: nil)
                }
            }
            decoder.decodeAll(&batch)
            for e in 0..<batch.eventCount {
                let (role, facts) = EventFacts.read(batch, event: e)
                if role != .other { out.append((role, facts)) }
            }
        }
        return out
    }()

    static let catalog: RuleCatalog = {
        var catalog = RuleCatalog()
        for (role, facts) in sample { catalog.observe(role: role, facts: facts) }
        return catalog
    }()

    /// A generated set, its matcher, and each regex compiled alone (by element rule); built once per size.
    struct Generated {
        var rules: RulesFile
        var matcher: RuleMatcher
        var singles: [RegexSet?]
    }

    nonisolated(unsafe) static var cache: [Int: Generated] = [:]

    func generated(_ count: Int) throws -> Generated {
        if let g = Self.cache[count] { return g }
        let clock = ContinuousClock()
        let t0 = clock.now
        let text = RuleSetGenerator(catalog: Self.catalog).yaml(count: count)
        XCTAssertEqual(text, RuleSetGenerator(catalog: Self.catalog).yaml(count: count), "deterministic")
        let t1 = clock.now
        let rules = try RulesFile.parse(text, file: "rules-\(count).yaml")
        print("rules-\(count): generated in \(t1 - t0), loaded in \(clock.now - t1)")
        let g = Generated(rules: rules, matcher: try RuleMatcher(rules: rules),
                          singles: try rules.elements.map { try $0.identifierRegex.map { try RegexSet([$0]) } })
        Self.cache[count] = g
        return g
    }

    /// A control click names two action identifiers (with and without its tag) that are seen equally often:
    /// the catalog orders them by first sighting, not by the dictionary's per-process order (which made the
    /// actions of generated files differ between runs). 24 such pairs: a random order passes once in 2^24.
    func testTiedActionIdentifiersAreOrderedByFirstSighting() {
        var catalog = RuleCatalog()
        for n in 0..<24 {
            var f = EventFacts()
            f.elementKind = "control"
            f.target = "Controller\(n)"
            f.action = "tap:"
            f.tag = "\(n % 3)"
            catalog.observe(role: .click, facts: f)
        }
        let expected = (0..<24).flatMap { n in ["Controller\(n)/tap:/\(n % 3)", "Controller\(n)/tap:"] }
        XCTAssertEqual(catalog.actions.map(\.id), expected)
    }

    func testGeneratedSetsLoadWithEveryRuleKind() throws {
        try XCTSkipIf(Self.sample.isEmpty, "needs testdata/traffic/sample.ndjson")
        for count in [10, 1000, 10_000] {
            let rules = try generated(count).rules
            XCTAssertEqual(rules.pages.count + rules.elements.count + rules.actions.count, count)
            XCTAssertEqual(rules.elements.filter { $0.identifierRegex != nil }.count, count / 10)
            guard count >= 1000 else { continue }
            let e = rules.elements
            XCTAssertTrue(rules.pages.contains { $0.screen != nil } && rules.pages.contains { $0.pagePath != nil })
            for (what, has) in [
                ("index", e.contains { $0.index != nil }), ("section", e.contains { $0.section != nil && $0.row == nil }),
                ("row", e.contains { $0.row != nil }), ("screen", e.contains { $0.screen != nil }),
                ("content", e.contains { $0.content != nil && $0.contentKey == nil }),
                ("content_key", e.contains { $0.contentKey != nil && $0.content != nil }),
                ("group_by_content", e.contains { $0.groupByContent }),
                ("app_versions", e.contains { !$0.appVersions.isEmpty } && rules.pages.contains { !$0.appVersions.isEmpty }),
            ] { XCTAssertTrue(has, "\(count) rules: some element rule uses \(what)") }
            XCTAssertEqual(Set(rules.actions.map(\.kind)), Set(ActionKind.allCases))
        }
    }

    /// `bench-match --conditions`: the generated `where:` conditions load, and some hold on the sample's events.
    func testGeneratedConditionsLoadAndFilter() throws {
        try XCTSkipIf(Self.sample.isEmpty, "needs testdata/traffic/sample.ndjson")
        let plain = try RuleMatcher(rules: RulesFile.parse(RuleSetGenerator(catalog: Self.catalog).yaml(count: 1000)))
        let text = RuleSetGenerator(catalog: Self.catalog, conditions: 50).yaml(count: 1000)
        let rules = try RulesFile.parse(text, file: "rules-1000.yaml")
        let withWhere = rules.pages.filter { !$0.conditions.isEmpty }.count + rules.elements.filter { !$0.conditions.isEmpty }.count
            + rules.actions.filter { !$0.conditions.isEmpty }.count
        XCTAssertGreaterThan(withWhere, 300)
        XCTAssertLessThan(withWhere, 700)
        let m = try RuleMatcher(rules: rules)
        XCTAssertTrue(m.hasConditions)
        var kept = 0, dropped = 0
        for (role, facts) in Self.sample.prefix(3000) {
            var all: [Int] = [], filtered: [Int] = []
            plain.match(role: role, facts: facts, into: &all)
            m.match(role: role, facts: facts, into: &filtered)
            XCTAssertTrue(Set(filtered).isSubset(of: Set(all)), "conditions only remove candidates")
            kept += filtered.count
            dropped += all.count - filtered.count
        }
        XCTAssertGreaterThan(kept, 0)
        XCTAssertGreaterThan(dropped, 0)
    }

    /// The multi-pattern scan reports exactly the patterns that match when each is compiled and tried alone.
    func testMultiPatternScanEqualsOneByOne() throws {
        try XCTSkipIf(Self.sample.isEmpty, "needs testdata/traffic/sample.ndjson")
        let identifiers = Array(Set(Self.sample.filter { $0.0 == .click }.map { $0.1.elementIdentifier })).sorted()
        for count in [10, 1000, 10_000] {
            let g = try generated(count)
            let set = g.matcher.index.regexes
            let singles = g.singles.compactMap { $0 }
            XCTAssertEqual(set.patterns, g.rules.elements.compactMap(\.identifierRegex))
            var several = 0, none = 0
            for id in identifiers {
                let one = singles.indices.filter { singles[$0].matches(id) }
                XCTAssertEqual(set.matching(id), one, id)
                XCTAssertEqual(set.matching(id), one, "from the cache: \(id)")
                if one.count > 1 { several += 1 }
                if one.isEmpty { none += 1 }
            }
            XCTAssertGreaterThan(none, 0, "\(count) rules: some identifiers match no regex")
            if count >= 1000 { XCTAssertGreaterThan(several, 0, "\(count) rules: some identifiers match several regexes") }
        }
    }

    /// The indexed matcher equals trying every rule one by one (every regex compiled alone) on a sample of events.
    func testMatcherEqualsRuleByRule() throws {
        try XCTSkipIf(Self.sample.isEmpty, "needs testdata/traffic/sample.ndjson")
        for (count, step) in [(10, 3), (1000, 7), (10_000, 100)] {
            let g = try generated(count)
            let (rules, matcher, singles) = (g.rules, g.matcher, g.singles)
            var matched = 0, regexHits = 0
            for n in stride(from: 0, to: Self.sample.count, by: step) {
                let (role, facts) = Self.sample[n]
                var hits: [Int] = []
                matcher.match(role: role, facts: facts, into: &hits)
                let expected = Self.ruleByRule(rules, singles, role, facts)
                XCTAssertEqual(hits.map { matcher.id(of: $0) }, expected, "\(count) rules, event \(n)")
                if !expected.isEmpty { matched += 1 }
                regexHits += expected.filter { $0.hasPrefix("r") }.count
            }
            XCTAssertGreaterThan(matched, 0, "\(count) rules match some events")
            XCTAssertGreaterThan(regexHits, 0, "\(count) rules: some regex rules match")
        }
    }

    /// wire format §4, literally: every rule in file order, exact meaning the same UTF-8 bytes.
    static func ruleByRule(_ rules: RulesFile, _ singles: [RegexSet?], _ role: EventRole, _ f: EventFacts) -> [String] {
        func same(_ a: String?, _ b: String?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            // Equal bytes imply equal Strings: the quick String comparison rejects most pairs.
            return a == b && Array(a.utf8) == Array(b.utf8)
        }
        if let page = f.page, (RuleMatcher.defaultIgnoredPages + rules.ignorePages).contains(where: { same($0, page) }) { return [] }
        let version = f.appVersion.flatMap { VersionCondition.parse(Substring($0)) }
        func holds(_ c: [VersionCondition]) -> Bool { c.isEmpty || (version.map { v in c.allSatisfy { $0.holds(v) } } ?? false) }
        var out: [String] = []
        switch role {
        case .pageEnter:
            for r in rules.pages where holds(r.appVersions) {
                if let s = r.screen, !same(s, f.page) { continue }
                if let p = r.pagePath, !same(p, f.pagePath) { continue }
                out.append(r.id)
            }
            for a in rules.actions where a.kind == .pagePV && same(a.id, f.page) { out.append(a.id) }
        case .click:
            let position = f.elementPosition.map { $0.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false) }
            let section = position.flatMap { $0.count == 2 ? Int($0[0]) : nil }
            let row = position.flatMap { $0.count == 2 && Int($0[0]) != nil ? Int($0[1]) : nil }
            let identifier = f.elementIdentifier
            for (i, r) in rules.elements.enumerated() where holds(r.appVersions) {
                if let re = singles[i] {
                    if !re.matches(identifier) { continue }
                } else if !same(r.path, f.elementPath) || !same(r.type, f.elementType) {
                    continue
                }
                if let p = r.path, !same(p, f.elementPath) { continue }
                if let t = r.type, !same(t, f.elementType) { continue }
                if let s = r.screen, !same(s, f.page) { continue }
                if let p = r.pagePath, !same(p, f.pagePath) { continue }
                if let want = r.index, f.elementIndex.flatMap({ Int($0) }) != want { continue }
                if let want = r.section, section != want { continue }
                if let want = r.row, row != want { continue }
                if let key = r.contentKey {
                    guard let item = f.contentItems.first(where: { same($0.0, key) })?.1 else { continue }
                    if let want = r.content, !same(want, item) { continue }
                } else {
                    if let want = r.content, !same(want, f.content) { continue }
                    if r.groupByContent && f.content == nil { continue }
                }
                out.append(r.id)
            }
            let identifiers = f.actionIdentifiers
            for a in rules.actions where identifiers.contains(where: { $0.0 == a.kind && same($0.1, a.id) }) { out.append(a.id) }
        case .other:
            break
        }
        return out
    }
}
