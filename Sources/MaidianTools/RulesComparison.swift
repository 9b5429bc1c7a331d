import MaidianEvents
import MaidianRules

/// `maidian rules compare`: per rule, the matches of the live rules file and of a candidate on the same
/// input, with what changed in the rule's definition (`RulesDiff`).
public struct RulesComparison: Sendable {
    /// One rule's line.
    public struct Row: Sendable, Equatable {
        /// The rule id (action rules: their identifier).
        public var id: String
        /// `unchanged`, `changed`, `added` (candidate only) or `removed` (live only).
        public var status: String
        /// Matches with each file (nil: the rule is not in it).
        public var live: Int?, candidate: Int?
    }

    /// Rows: the candidate's rules in file order, then the removed ones.
    public var rows: [Row]

    /// Compares two reports over the same input.
    public init(live: RulesReport, candidate: RulesReport, diff: RulesDiff) {
        let liveMatches = Dictionary(live.rules.map { ($0.id, $0.matches) }, uniquingKeysWith: { a, _ in a })
        let changed = Set(diff.changed), added = Set(diff.added)
        rows = candidate.rules.map { r in
            Row(id: r.id, status: added.contains(r.id) ? "added" : changed.contains(r.id) ? "changed" : "unchanged",
                live: liveMatches[r.id], candidate: r.matches)
        }
        let inCandidate = Set(candidate.rules.map(\.id))
        rows += live.rules.filter { !inCandidate.contains($0.id) }.map { Row(id: $0.id, status: "removed", live: $0.matches, candidate: nil) }
    }

    /// Rows whose matches differ.
    public var differing: [Row] { rows.filter { $0.live != $0.candidate } }

    /// A table: id, status, live, candidate, difference; differing rows marked `*`.
    public var text: String {
        let width = max(4, rows.map(\.id.count).max() ?? 0)
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        func left(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
        var out = "  " + pad("rule", width) + "  " + pad("status", 9) + left("live", 9) + left("candidate", 11) + left("change", 9) + "\n"
        for r in rows {
            let delta = r.live != nil && r.candidate != nil ? (r.candidate! >= r.live! ? "+" : "") + String(r.candidate! - r.live!) : ""
            out += (r.live != r.candidate ? "* " : "  ") + pad(r.id, width) + "  " + pad(r.status, 9)
                + left(r.live.map(String.init) ?? "-", 9) + left(r.candidate.map(String.init) ?? "-", 11) + left(delta, 9) + "\n"
        }
        out += "\(differing.count) of \(rows.count) rules match differently\n"
        return out
    }

    /// `{"rules": [{"id", "status", "live", "candidate"}], "differing": n}` (absent counts are null).
    public var json: String {
        let q = JSONOut.quoted
        let items = rows.map {
            "{\"id\":\(q($0.id)),\"status\":\(q($0.status)),\"live\":\($0.live.map(String.init) ?? "null"),\"candidate\":\($0.candidate.map(String.init) ?? "null")}"
        }
        return "{\"rules\":[" + items.joined(separator: ",") + "],\"differing\":\(differing.count)}"
    }
}
