/// What changed between two versions of a rules file, by rule id (action rules: their identifier).
public struct RulesDiff: Sendable, Equatable {
    /// Ids only in the new version, in file order.
    public var added: [String] = []
    /// Ids only in the old version, in file order.
    public var removed: [String] = []
    /// Ids in both whose definition differs (where an id sits in the file does not count).
    public var changed: [String] = []
    /// Whether `ignore_pages` differs.
    public var ignorePagesChanged = false

    /// No rule and no ignored page changed.
    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty && !ignorePagesChanged }

    /// Compares `new` with `old`.
    public init(from old: RulesFile, to new: RulesFile) {
        let before = Dictionary(RuleDefinition.all(old), uniquingKeysWith: { a, _ in a })
        let after = Dictionary(RuleDefinition.all(new), uniquingKeysWith: { a, _ in a })
        for (id, definition) in RuleDefinition.all(new) {
            if let previous = before[id] {
                if previous != definition { changed.append(id) }
            } else {
                added.append(id)
            }
        }
        removed = RuleDefinition.all(old).map(\.0).filter { after[$0] == nil }
        ignorePagesChanged = Set(old.ignorePages) != Set(new.ignorePages)
    }
}

/// A rule's definition without its id and source location, for comparing versions.
private indirect enum RuleDefinition: Equatable {
    case page([String?], versions: [VersionCondition], conditions: [Condition], drawings: [RuleDefinition])
    case element([String?], [Int?], groupByContent: Bool, versions: [VersionCondition], conditions: [Condition], drawings: [RuleDefinition])
    case action(ActionKind, userDefined: [[String]], pagePara: [PageParameter], versions: [VersionCondition], conditions: [Condition])

    static func page(_ p: PageRule) -> RuleDefinition {
        .page([p.screen, p.pagePath, p.pagePathRegex], versions: p.appVersions, conditions: p.conditions, drawings: p.drawings.map(page))
    }

    static func element(_ e: ElementRule) -> RuleDefinition {
        .element([e.screen, e.pagePath, e.path, e.type, e.content, e.contentKey, e.identifierRegex, e.pagePathRegex, e.contentRegex],
                 [e.index, e.section, e.row], groupByContent: e.groupByContent, versions: e.appVersions, conditions: e.conditions,
                 drawings: e.drawings.map(element))
    }

    static func all(_ rules: RulesFile) -> [(String, RuleDefinition)] {
        rules.pages.map { ($0.id, page($0)) } + rules.elements.map { ($0.id, element($0)) }
            + rules.actions.map { a in
                (a.id, .action(a.kind, userDefined: a.userDefined.map { [$0.0, $0.1] }, pagePara: a.pagePara, versions: a.appVersions,
                               conditions: a.conditions))
            }
    }
}

extension RulesFile {
    /// The rules of this file that are new or changed since `old` (by `RulesDiff`), with this file's
    /// `ignore_pages`: what a backfill recomputes.
    public func changed(since old: RulesFile) -> RulesFile {
        let diff = RulesDiff(from: old, to: self)
        let keep = Set(diff.added + diff.changed)
        var out = self
        out.pages = pages.filter { keep.contains($0.id) }
        out.elements = elements.filter { keep.contains($0.id) }
        out.actions = actions.filter { keep.contains($0.id) }
        return out
    }
}
