import MaidianEvents

extension RuleMatcher {
    /// The count a hit feeds: `pv` for page rules and PAGEPV entries, `click` for the rest.
    public func metric(of hit: Int) -> MatchMetric {
        if hit < rules.pages.count { return .pv }
        if let a = action(of: hit) { return a.kind == .pagePV ? .pv : .click }
        return .click
    }

    /// For a `group_by_content` element rule: the content item it groups by (`content_key`), or "" for
    /// the element's string content. Nil for every other rule.
    public func groupingKey(of hit: Int) -> String? {
        let e = hit - rules.pages.count
        guard e >= 0, e < rules.elements.count, rules.elements[e].groupByContent else { return nil }
        return rules.elements[e].contentKey ?? ""
    }
}
