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

    /// What `compactCombos` renumbered: each old number's new one (-1: left out).
    struct ComboNumbers {
        var combos: [Int32]
        var contents: [Int32]
        /// Dims identities (the dims of pv and click tuples).
        var identities: [Int32]
        /// Visit dims (`dimsSets`: the dims of visits, waiting events and dwell tuples).
        var visitDims: [Int32]

        /// A tuple's content and dims renumbered (its dims are a visit's for dwell, an identity's otherwise).
        func renumber(_ tuple: AggregateTuple) -> AggregateTuple {
            var t = tuple
            if t.content >= 0 { t.content = contents[Int(t.content)] }
            if t.dims >= 0 { t.dims = t.metric == 2 ? visitDims[Int(t.dims)] : identities[Int(t.dims)] }
            return t
        }
    }

    /// Keeps only the combos `keep` marks (by number), the `group_by_content` contents and dims they name, and
    /// the visit dims `visitDims` marks (the state's visits and waiting events), with their key, head and JSON
    /// forms, and renumbers them. A combo is made for every new (metric, rule, dims, content), and contents or
    /// dims values that rarely repeat (order numbers, names, crafted app versions) made these tables grow
    /// without bound: about 650 bytes a combo, 300 a dims value. The next compaction comes when the combos have
    /// doubled since this one.
    /// `keepVisits` has one mark per `dimsSets` text.
    func compactCombos(keeping keep: [Bool], visitDims keepVisits: [Bool]) -> ComboNumbers {
        var keepContents = [Bool](repeating: false, count: contents.count)
        var keepIdentities = [Bool](repeating: false, count: dimsIdentities.count)
        var keepVisits = keepVisits
        var kept = 0
        for c in combos.indices where keep[c] {
            kept += 1
            let t = combos[c].combo
            if t.content >= 0 { keepContents[Int(t.content)] = true }
            if t.dims >= 0 {
                if t.metric == 2 { keepVisits[Int(t.dims)] = true } else { keepIdentities[Int(t.dims)] = true }
            }
        }
        // A kept identity's visit dims stay too: the identity remembers them (`visitDims(_:)`).
        for d in dimsInfos.indices where keepIdentities[d] && dimsInfos[d].visitDims >= 0 { keepVisits[Int(dimsInfos[d].visitDims)] = true }

        let (newContents, contentNumbers) = contents.compacted(keeping: keepContents)
        contents = newContents
        let (newSets, visitNumbers) = dimsSets.compacted(keeping: keepVisits)
        dimsSets = newSets
        // `compacted` numbers the kept texts in their old order: the side tables follow the same order.
        dimsHeads = dimsHeads.indices.filter { keepVisits[$0] }.map { dimsHeads[$0] }
        let (newIdentities, identityNumbers) = dimsIdentities.compacted(keeping: keepIdentities)
        dimsIdentities = newIdentities
        dimsInfos = dimsInfos.indices.filter { keepIdentities[$0] }.map { d in
            var info = dimsInfos[d]
            if info.visitDims >= 0 { info.visitDims = visitNumbers[Int(info.visitDims)] }
            return info
        }
        var numbers = ComboNumbers(combos: [Int32](repeating: -1, count: combos.count), contents: contentNumbers,
                                   identities: identityNumbers, visitDims: visitNumbers)
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
            pieces.combo = numbers.renumber(pieces.combo)
            pieces.keyPrefix = move(pieces.keyPrefix)
            pieces.keySuffix = move(pieces.keySuffix)
            pieces.headPrefix = move(pieces.headPrefix)
            pieces.headDims = move(pieces.headDims)
            numbers.combos[c] = Int32(newCombos.count)
            var h = pieces.combo.hash
            while table.get(h) != nil { h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1 }  // as `combo` probes
            table.set(h, Int64(newCombos.count))
            newCombos.append(pieces)
        }
        combos = newCombos
        comboBytes = newBytes
        comboTable = table
        compactCombosAt = max(comboCompactionFloor, 2 * combos.count)
        return numbers
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
