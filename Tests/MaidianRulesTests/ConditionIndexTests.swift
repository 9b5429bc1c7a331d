import MaidianEvents
import MaidianRecording
import MaidianTools
@testable import MaidianRules
import XCTest

/// The compiled conditions (tests shared between rules and memoized per event, values loaded once, regex
/// results cached by text) against a plain evaluation of each rule's conditions, one by one, on random rule
/// sets and events (fixed seeds). One scratch serves all events of a seed, as in the match stage, so stale
/// memos or cache entries from an earlier event would show.
final class ConditionIndexTests: XCTestCase {
    static let names = ["os", "n", "price", "title", "net"]
    static let scalars = ["iOS", "Android", "12", "7.5", "true", "WIFI", "4G", "Sale: x", "", "0", "-3"]
    static let patterns = ["^A", "i", "^[0-9]+$", "S$", "^(WIFI|4G)|^Z1$", "^(WIFI|4G)|^Z2$", "x", "^$", "(?i)sale", "^Z1", "7$", "^Z[0-4]"]
    /// Property values as JSON (nil: absent).
    static let jsonValues: [String?] = [
        nil, #""iOS""#, #""Android""#, #""And\u0072oid""#, "12", #""12""#, "7.5", "12.0", "-3", "0", "true", #""true""#, "null",
        #"{"a":1}"#, "[1]", #""WIFI""#, #""4G""#, #""""#, #""Sale: x""#, #""SALE""#, "1e1", #""x\"y""#,
    ]

    func q(_ s: String) -> String { JSONOut.quoted(s) }

    func randomTests(_ rng: inout SplitMix64) -> String {
        func scalar() -> String { q(Self.scalars.randomElement(using: &rng)!) }
        func list() -> String { "[" + (0..<Int.random(in: 1...3, using: &rng)).map { _ in scalar() }.joined(separator: ", ") + "]" }
        func number() -> String { ["0", "7.5", "10", "12", "-3", "100"].randomElement(using: &rng)! }
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: return scalar()
        case 1: return list()
        case 2: return "{\"!=\": \(scalar())}"
        case 3: return "{not_in: \(list())}"
        case 4: return "{\(q([">", ">=", "<", "<="].randomElement(using: &rng)!)): \(number())}"
        case 5: return "{\">\": \(number()), \"<=\": \(number())}"
        case 6: return "{regex: \(q(Self.patterns.randomElement(using: &rng)!))}"
        default: return "{regex: \(q(Self.patterns.randomElement(using: &rng)!)), \"!=\": \(scalar())}"
        }
    }

    func randomRules(_ rng: inout SplitMix64, count: Int) -> String {
        var out = "version: 1\npages:\n"
        func whereYAML() -> String {
            let n = Int.random(in: 0...2, using: &rng)
            guard n > 0 else { return "" }
            let names = Self.names.shuffled(using: &rng).prefix(n)
            return ", where: {" + names.map { "\($0): \(randomTests(&rng))" }.joined(separator: ", ") + "}"
        }
        for i in 0..<(count / 4) { out += "  - {id: \"p\(i)\", screen: \"S\"\(whereYAML())}\n" }
        out += "elements:\n"
        for i in 0..<count { out += "  - {id: \"e\(i)\", path: \"W-V\", type: UIButton\(whereYAML())}\n" }
        return out
    }

    /// A property's value as the plain evaluation reads it.
    struct Value {
        var kind: PropertyValue.Kind
        var text: String
        init(json: String) {
            switch json.utf8.first! {
            case 0x22:
                kind = .string
                text = Array(json.utf8).withUnsafeBytes { JSONMembers.string($0)! }
                return
            case 0x7B: kind = .object
            case 0x74, 0x66: kind = .bool
            case 0x6E, 0x5B: kind = .other
            default: kind = .number
            }
            text = json
        }
    }

    /// `numberValue`'s reading, written plainly: a finite Double starting with a digit, sign or dot.
    static func number(_ s: String) -> Double? {
        guard let c = s.utf8.first, (0x30...0x39).contains(c) || c == 0x2D || c == 0x2B || c == 0x2E,
              let d = Double(s), d.isFinite else { return nil }
        return d
    }

    var regexes: [String: RegexSet] = [:]

    func plainHolds(_ c: Condition, _ properties: [(String, String)]) throws -> Bool {
        guard case .property(let name) = c.subject, let json = properties.first(where: { $0.0 == name })?.1 else { return false }
        let v = Value(json: json)
        func equalsAny(_ values: [String]) -> Bool {
            switch v.kind {
            case .string, .bool: return values.contains(v.text)
            case .number:
                if values.contains(v.text) { return true }
                guard let x = Self.number(v.text) else { return false }
                return values.contains { Self.number($0) == x }
            case .object, .other: return false
            }
        }
        for t in c.tests {
            let holds: Bool
            switch t {
            case .anyOf(let values): holds = equalsAny(values)
            case .noneOf(let values): holds = !equalsAny(values)
            case .compare(let op, let bound):
                if (v.kind == .number || v.kind == .string), let x = Self.number(v.text) { holds = op.holds(x, bound) } else { holds = false }
            case .regex(let pattern):
                guard v.kind != .object && v.kind != .other else { return false }
                let set = try regexes[pattern] ?? RegexSet([pattern], cacheSlots: 0)
                regexes[pattern] = set
                holds = set.matches(v.text)
            }
            if !holds { return false }
        }
        return true
    }

    func testCompiledConditionsAgreeWithPlainEvaluation() throws {
        for seed: UInt64 in [1, 2, 3, 4, 5, 6, 7, 8] {
            var rng = SplitMix64(seed: seed)
            let file = try RulesFile.parse(randomRules(&rng, count: 60), file: "random-\(seed).yaml")
            let matcher = try RuleMatcher(rules: file)
            XCTAssertTrue(matcher.hasConditions)
            var scratch = ConditionScratch()
            var checked = 0, kept = 0
            for e in 0..<400 {
                var f = EventFacts()
                f.screenName = "S"
                f.elementPath = "W-V"
                f.elementType = "UIButton"
                for name in Self.names {
                    if Int.random(in: 0..<3, using: &rng) == 0 {
                        // Many distinct texts: the regex results cached by text must be told apart (slots are shared).
                        f.properties.append((name, q("Z\(Int.random(in: 0..<150, using: &rng))")))
                    } else if let json = Self.jsonValues.randomElement(using: &rng)! {
                        f.properties.append((name, json))
                    }
                }
                let role: EventRole = e % 3 == 0 ? .pageEnter : .click
                var hits: [Int] = []
                matcher.match(role: role, facts: f, into: &hits, conditions: false)
                let candidates = hits
                var props = FactsProperties(pairs: f.properties)
                matcher.applyConditions(&hits, from: 0, properties: &props, lib: .absent, scratch: &scratch)
                var expected: [Int] = []
                for h in candidates {
                    let conditions = h < file.pages.count ? file.pages[h].postConditions : file.elements[h - file.pages.count].postConditions
                    if try conditions.allSatisfy({ try plainHolds($0, f.properties) }) { expected.append(h) }
                }
                XCTAssertEqual(hits, expected, "seed \(seed), event \(e): \(f.properties)")
                if hits != expected { return }
                checked += candidates.count
                kept += hits.count
            }
            // The sets are neither trivially empty nor trivially full.
            XCTAssertGreaterThan(kept, checked / 20, "seed \(seed)")
            XCTAssertLessThan(kept, checked, "seed \(seed)")
        }
    }
}
