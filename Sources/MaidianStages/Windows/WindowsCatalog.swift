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
    /// Click `$element_path`s, and identifiers keyed by their path's number and the rest of their text
    /// (`WindowsProcessor.elementNumber`), with each one's `elementsText` number.
    @exclusivity(unchecked) var elementPaths = Interner()
    @exclusivity(unchecked) var elementKeys = Interner()
    @exclusivity(unchecked) var elementOfKey: [Int32] = []
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

    /// Page and element texts (together) below which `compactTexts` never runs: 65,536, about 15 MB of click
    /// identifiers of the sample's kind. A variable for tests.
    @exclusivity(unchecked) var textCompactionFloor = 1 << 16
    /// Page and element texts (together) at which `compactTexts` runs next.
    @exclusivity(unchecked) var compactTextsAt = 1 << 16

    /// Whether pages and element identifiers have grown enough since the last compaction to compact them.
    var textsToCompact: Bool { pagesText.count + elementsText.count >= compactTextsAt }

    /// Keeps only the page texts (pages and app versions) and element identifiers `pages` and `elements` mark
    /// (by number), and returns each old number's new one (-1: left out). The memos keyed by those numbers
    /// (element paths and keys, visit heads, ignored pages) start over. The next compaction comes when the texts
    /// have doubled since this one, so its cost stays proportional to what was added.
    func compactTexts(pages: [Bool], elements: [Bool]) -> (pages: [Int32], elements: [Int32]) {
        let (newPages, pageNumbers) = pagesText.compacted(keeping: pages)
        let (newElements, elementNumbers) = elementsText.compacted(keeping: elements)
        pagesText = newPages
        elementsText = newElements
        elementPaths = Interner()
        elementKeys = Interner()
        elementOfKey = []
        visitHeads = HashTable64(capacity: 64)
        visitHeadBytes = []
        visitHeadSpans = []
        pageIgnored = []
        compactTextsAt = max(textCompactionFloor, 2 * (pagesText.count + elementsText.count))
        return (pageNumbers, elementNumbers)
    }

    /// Aggregate combos below which `compactCombos` never runs: 65,536, about 40 MB of combos of the sample's
    /// kind. A variable for tests.
    @exclusivity(unchecked) var comboCompactionFloor = 1 << 16
    /// Aggregate combos at which `compactCombos` runs next.
    @exclusivity(unchecked) var compactCombosAt = 1 << 16

    /// Whether the aggregate combos have grown enough since the last compaction to compact them.
    var combosToCompact: Bool { combos.count >= compactCombosAt }

    /// Keeps only the combos `keep` marks (by number) and the `group_by_content` contents they name, with their
    /// key and head pieces, and returns each old combo number's new one (-1: left out) and each old content
    /// number's. A combo is made for every new (metric, rule, dims, content), and contents that rarely repeat
    /// (order numbers, names), or uploads crafted that way, made the combos grow without bound: about 650
    /// bytes each. The next compaction comes when the combos have doubled since this one.
    func compactCombos(keeping keep: [Bool]) -> (combos: [Int32], contents: [Int32]) {
        var keepContents = [Bool](repeating: false, count: contents.count)
        var kept = 0
        for c in combos.indices where keep[c] {
            kept += 1
            let content = combos[c].combo.content
            if content >= 0 { keepContents[Int(content)] = true }
        }
        let (newContents, contentNumbers) = contents.compacted(keeping: keepContents)
        contents = newContents
        var numbers = [Int32](repeating: -1, count: combos.count)
        var newCombos: [ComboPieces] = []
        newCombos.reserveCapacity(kept)
        var newBytes: [UInt8] = []
        var table = HashTable64(capacity: max(256, 2 * kept))
        func move(_ r: Range<Int>) -> Range<Int> {
            let start = newBytes.count
            newBytes.append(contentsOf: comboBytes[r])
            return start..<newBytes.count
        }
        for c in combos.indices where keep[c] {
            var pieces = combos[c]
            if pieces.combo.content >= 0 { pieces.combo.content = contentNumbers[Int(pieces.combo.content)] }
            pieces.keyPrefix = move(pieces.keyPrefix)
            pieces.keySuffix = move(pieces.keySuffix)
            pieces.headPrefix = move(pieces.headPrefix)
            pieces.headDims = move(pieces.headDims)
            numbers[c] = Int32(newCombos.count)
            var h = pieces.combo.hash
            while table.get(h) != nil { h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1 }  // as `combo` probes
            table.set(h, Int64(newCombos.count))
            newCombos.append(pieces)
        }
        combos = newCombos
        comboBytes = newBytes
        comboTable = table
        compactCombosAt = max(comboCompactionFloor, 2 * combos.count)
        return (numbers, contentNumbers)
    }

    /// Whether an interned page is ignored (the defaults plus `ignore_pages`).
    @inline(__always)
    func isIgnored(page: Int32) -> Bool {
        while pageIgnored.count <= Int(page) {
            let text = Array(pagesText[Int32(pageIgnored.count)])
            pageIgnored.append(ignored.contains { $0 == text })
        }
        return pageIgnored[Int(page)]
    }

    /// The visit dims of a dims identity (interned by key; the first JSON seen for a key is its head).
    func visitDims(_ d: Int32) -> Int32 {
        let known = dimsInfos[Int(d)].visitDims
        if known >= 0 { return known }
        let info = dimsInfos[Int(d)]
        let visit = dimsSets.intern(info.key)
        if Int(visit) == dimsHeads.count { dimsHeads.append(info.json) }
        dimsInfos[Int(d)].visitDims = visit
        return visit
    }

    /// `,"page":..,"rules":[..],"enter_time":` of a visit's record, written once per page and rule set.
    func visitHead(page: Int32, rules: Int32) -> Range<Int> {
        // A one-to-one mix (murmur3's finalizer), so the table key is the pair itself; the table indexes by the
        // low bits, which a plain multiplication would leave depending on `rules` alone (one probe chain).
        var key = UInt64(UInt32(bitPattern: page)) << 32 | UInt64(UInt32(bitPattern: rules))
        key = (key ^ (key >> 33)) &* 0xFF51_AFD7_ED55_8CCD
        key = (key ^ (key >> 33)) &* 0xC4CE_B9FE_1A85_EC53
        key ^= key >> 33
        if let i = visitHeads.get(key) { return visitHeadSpans[Int(i)] }
        let start = visitHeadBytes.count
        JSONOut.appendRaw(",\"page\":", to: &visitHeadBytes)
        visitHeadBytes.append(0x22)
        pagesText[page].appendEscaped(to: &visitHeadBytes)
        visitHeadBytes.append(0x22)
        JSONOut.appendRaw(",\"rules\":", to: &visitHeadBytes)
        visitHeadBytes.append(contentsOf: ruleSets[rules])
        JSONOut.appendRaw(",\"enter_time\":", to: &visitHeadBytes)
        visitHeads.set(key, Int64(visitHeadSpans.count))
        visitHeadSpans.append(start..<visitHeadBytes.count)
        return start..<visitHeadBytes.count
    }

    init(eventNames: Interner, ignored: [[UInt8]]) {
        self.eventNames = eventNames
        self.ignored = ignored
    }
}
