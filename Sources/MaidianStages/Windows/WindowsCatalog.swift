import MaidianEvents

/// What the windows stage has numbered, shared by every partition and kept for the stage's life: the
/// interned texts (pages, elements, event names, rule lists and rule ids, contents), the dims identities and
/// their key and JSON forms, the aggregate combos with their key and head pieces, and the visit record
/// heads. Event processing adds to it; emission reads it. One owner (the stage), so the tables are not
/// copied and their numbers stay valid across batches.
final class WindowsCatalog {
    /// Page names that are never visits (the defaults plus `ignore_pages`).
    let ignored: [[UInt8]]

    @exclusivity(unchecked) var pagesText = Interner()
    @exclusivity(unchecked) var elementsText = Interner()
    @exclusivity(unchecked) var eventNames: Interner
    @exclusivity(unchecked) var ruleSets = Interner()
    /// Per `ruleSets` number: the `ruleTexts` numbers of its rules.
    @exclusivity(unchecked) var ruleSetRules: [[Int32]] = []
    /// Decoded rule ids and `group_by_content` contents, numbered for aggregate tuples.
    @exclusivity(unchecked) var ruleTexts = Interner()
    @exclusivity(unchecked) var contents = Interner()
    /// Visit dims: `k=v,...` keys, and the JSON first seen for each.
    @exclusivity(unchecked) var dimsSets = Interner()
    @exclusivity(unchecked) var dimsHeads: [[UInt8]] = []
    /// Dims identities (see `dimsIdentity`) and their forms.
    @exclusivity(unchecked) var dimsIdentities = Interner()
    @exclusivity(unchecked) var dimsInfos: [DimsInfo] = []
    /// Aggregate combos (tuples without their window), by hash, with their key and head pieces.
    @exclusivity(unchecked) var comboTable = HashTable64(capacity: 256)
    @exclusivity(unchecked) var combos: [ComboPieces] = []
    @exclusivity(unchecked) var comboBytes: [UInt8] = []
    /// Visit record heads by (page, rule set): see `visitHead`.
    @exclusivity(unchecked) var visitHeads = HashTable64(capacity: 64)
    @exclusivity(unchecked) var visitHeadBytes: [UInt8] = []
    @exclusivity(unchecked) var visitHeadSpans: [Range<Int>] = []
    /// Per `pagesText` number: whether the page is ignored (filled on demand).
    @exclusivity(unchecked) var pageIgnored: [Bool] = []

    init(eventNames: Interner, ignored: [[UInt8]]) {
        self.eventNames = eventNames
        self.ignored = ignored
    }
}
