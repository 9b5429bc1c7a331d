import MaidianEvents
import MaidianPipeline

/// The dims of one dims identity (the texts of the `by` properties): their key and JSON forms and where
/// `content=` goes in each.
struct DimsInfo {
    /// `k=v,...` without content.
    var key: [UInt8]
    /// `{"k":"v",...}` without content.
    var json: [UInt8]
    var keyContentPosition: Int
    var jsonContentPosition: Int
    /// The visit dims (`dimsSets` number) of the key, once a page-enter event had these dims; else -1.
    var visitDims: Int32 = -1
}

/// An aggregate tuple without its window, with the pieces of its key and head in `WindowsStage.comboBytes`.
struct ComboPieces {
    var combo: AggregateTuple
    var keyPrefix: Range<Int>
    var keySuffix: Range<Int>
    var headPrefix: Range<Int>
    var headDims: Range<Int>
}

/// The per-event work of the windows stage: marks late and too-late events, counts matched events into
/// their partition's windows, queues role events and pairs them in event-time order (`advance`, `apply`),
/// keeping each install's trail. Owns its reusable buffers and the property finder; numbers texts in the
/// catalog and hands closed visits, trails, windows and progress to the emitter.
final class WindowsProcessor {
    /// Processing time, for when a partition last had input (idle detection).
    let clock: ProcessingClock
    let catalog: WindowsCatalog
    let settings: WindowsSettings
    let emitter: WindowsEmitter
    let finder: PropertyFinder
    let lateCounter: StageCounter
    let tooLateCounter: StageCounter
    let orphanCounter: StageCounter

    // Reused buffers.
    @exclusivity(unchecked) var text: [UInt8] = []
    @exclusivity(unchecked) var keyBuffer: [UInt8] = []
    @exclusivity(unchecked) var identity: [UInt8] = []
    @exclusivity(unchecked) var identifier: [UInt8] = []
    /// The last `$element_path`s numbered (`pathNumber`).
    @exclusivity(unchecked) var recentPaths = RecentTexts()
    @exclusivity(unchecked) var libMemoKey: [UInt8] = []
    @exclusivity(unchecked) var libMemoValue: [UInt8]?
    @exclusivity(unchecked) var lateEvents: [Int32] = []
    @exclusivity(unchecked) var tooLateEvents: [Int32] = []
    /// Events taken off the heap to be paired (`drain`).
    @exclusivity(unchecked) var drained: [PendingEvent] = []
    /// Hash64 of each record's key, by record (`warm`).
    @exclusivity(unchecked) var keyHashes: [UInt64] = []
    /// What the warming loops read, kept so that their reads are not optimized away.
    @exclusivity(unchecked) var warmSink = 0
    /// The batch's partition states by partition number (`batchState`).
    @exclusivity(unchecked) var batchStates: [PartitionWindows?] = []
    /// Hash64 of the current record's key, and whether one of its events was that install's (see `process`).
    @exclusivity(unchecked) var recordKey: UInt64 = 0
    @exclusivity(unchecked) var recordKeyTaken = false

    /// The counters come from the stage, which registers them in their listed order.
    init(catalog: WindowsCatalog, settings: WindowsSettings, emitter: WindowsEmitter,
         late: StageCounter, tooLate: StageCounter, orphans: StageCounter, clock: ProcessingClock) {
        self.clock = clock
        self.catalog = catalog
        self.settings = settings
        self.emitter = emitter
        // A page is read from current_url only without $screen_name, a position from $element_index only
        // without $element_position.
        finder = PropertyFinder(settings.finderNames, alternatives: [(0, 1), (5, 6)])
        lateCounter = late
        tooLateCounter = tooLate
        orphanCounter = orphans
    }

    /// One batch: `state` gives a source partition's state (the stage owns the partitions).
    func process(_ batch: inout EventBatch, output: inout OutputBuffer, state: (Int32) -> PartitionWindows) {
        let now = clock.now
        var touched: [PartitionWindows] = []
        lateEvents.removeAll(keepingCapacity: true)
        tooLateEvents.removeAll(keepingCapacity: true)
        // Counting and queueing only read the batch; late events are marked after.
        batch.withView { v in
            warm(v, state: state)
            for r in 0..<v.recordCount {
                let rec = v.record(r)
                guard rec.status != .dropped else { continue }
                processRecord(v, r, rec, batchState(rec.partition, state), now: now, touched: &touched, output: &output)
            }
        }
        for i in lateEvents {
            batch.setFlag(Int(i), EventFlag.late)
            batch.addProperty(event: Int(i), name: "$late") { JSONOut.appendRaw("true", to: &$0) }
            lateCounter.add()
        }
        for i in tooLateEvents {
            batch.setFlag(Int(i), EventFlag.tooLate)
            tooLateCounter.add()
        }
        for st in touched {
            advance(st, final: false, record: st.ownerRecord, output: &output)
            st.lastRecord = -1
        }
        for i in batchStates.indices { batchStates[i] = nil }
    }

    /// One record that is not dropped, of the partition whose state is `st`.
    @inline(__always)
    private func processRecord(_ v: BatchView, _ r: Int, _ rec: InputRecord, _ st: PartitionWindows, now: ContinuousClock.Instant,
                               touched: inout [PartitionWindows], output: inout OutputBuffer) {
        // `lastRecord` is -1 until the partition's first record in this batch.
        if st.lastRecord < 0 { touched.append(st) }
        // What re-read records complete is written (and not produced again) before later records count.
        if !rec.replay && st.lastRecord >= 0 && v.record(Int(st.lastRecord)).replay {
            advance(st, final: false, record: st.lastRecord, output: &output)
            st.ownerRecord = Int32(r)
        }
        if st.lastRecord < 0 { st.ownerRecord = Int32(r) }
        st.lastRecord = Int32(r)
        st.lastInput = now
        guard rec.eventCount > 0 else { return }
        let received = rec.hasReceivedAt ? rec.receivedAt : rec.timestamp
        if received > st.collectorNow { st.collectorNow = received }
        // Rounded up: an install counts as silent only once it surely is.
        let receivedSeconds = UInt32(clamping: received / 1000 + (received % 1000 > 0 ? 1 : 0))
        // Any upload of an install tells it is not silent: its key is its anonymous id (wire format §1).
        // The install is looked up after the record's events, only when none of them was the key's install
        // (`take` then made the same update): nothing reads `lastReceived` or forgets installs meanwhile.
        let hasKey = rec.key.isPresent && rec.key.count > 0
        if hasKey {
            recordKey = keyHashes[r]
            recordKeyTaken = false
        }
        // Lateness is judged per record (one upload arrives at once) against the partition's watermark.
        let watermark = st.maxTime.map { saturatingSub($0, settings.lateness) } ?? .min
        let tooLate = saturatingSub(watermark, settings.allowedLateness)
        var newest = st.maxTime
        var drained = false
        for i in Int(rec.firstEvent)..<Int(rec.firstEvent + rec.eventCount) {
            let ev = v.event(i)
            guard ev.status == .live, ev.type.isTrack else { continue }
            if newest.map({ ev.time > $0 }) ?? true { newest = ev.time }
            if ev.time < watermark {
                lateEvents.append(Int32(i))
                // Too late: marked and counted, nothing else (wire format §5).
                if ev.time < tooLate {
                    tooLateEvents.append(Int32(i))
                    continue
                }
                // A late event is paired at once, after whatever the watermark at its record has passed:
                // the same order whichever batches the records came in (a re-read after a takeover).
                if !drained {
                    drained = true
                    drain(st, upTo: watermark, record: st.ownerRecord, output: &output)
                }
                st.recordWatermark = watermark
                take(v, ev, st, offset: rec.offset, index: i - Int(rec.firstEvent), received: receivedSeconds, newest: newest ?? ev.time, late: true, output: &output)
                st.recordWatermark = .min
                continue
            }
            take(v, ev, st, offset: rec.offset, index: i - Int(rec.firstEvent), received: receivedSeconds, newest: newest ?? ev.time, late: false, output: &output)
        }
        st.maxTime = newest
        if hasKey && !recordKeyTaken, let u = st.userByHash.get(recordKey), st.users[Int(u)].lastReceived < receivedSeconds {
            st.users[Int(u)].lastReceived = receivedSeconds
        }
        if let newest { sweepIfDue(st, watermark: saturatingSub(newest, settings.lateness), record: st.ownerRecord, output: &output) }
    }

    /// The state of source partition `p` for this batch: `state`'s answer, kept by partition number until the
    /// batch ends (the stage may drop or restore partitions between batches). Records of several partitions
    /// come interleaved; this spares a dictionary look-up per record.
    @inline(__always)
    private func batchState(_ p: Int32, _ state: (Int32) -> PartitionWindows) -> PartitionWindows {
        if p >= 0 && Int(p) < batchStates.count, let s = batchStates[Int(p)] { return s }
        return firstBatchState(p, state)
    }

    @inline(never)
    private func firstBatchState(_ p: Int32, _ state: (Int32) -> PartitionWindows) -> PartitionWindows {
        let s = state(p)
        // Kafka numbers partitions from 0; an unusually large number is looked up each time (`state` keeps it).
        if p >= 0 && p < 4096 {
            if Int(p) >= batchStates.count { batchStates.append(contentsOf: repeatElement(nil, count: Int(p) + 1 - batchStates.count)) }
            batchStates[Int(p)] = s
        }
        return s
    }

    /// Reads, for the whole batch, what the per-event work then looks up at random: each record's key (hashed
    /// into `keyHashes`) and the install state of its events and of its key. A loop that only reads has no read
    /// wait for another, so their cache misses overlap; interleaved with the per-event work, each would be
    /// waited for in turn. Changes nothing but `keyHashes` (the partitions it asks `state` for are the ones the
    /// batch's records then use).
    private func warm(_ v: BatchView, state: (Int32) -> PartitionWindows) {
        if keyHashes.count < v.recordCount { keyHashes = Array(repeating: 0, count: v.recordCount) }
        var sink = 0
        for r in 0..<v.recordCount {
            let rec = v.record(r)
            guard rec.status != .dropped, rec.eventCount > 0 else { continue }
            let st = batchState(rec.partition, state)
            @inline(__always) func touch(_ install: UInt64) {
                if let u = st.userByHash.get(install) {
                    sink &+= Int(truncatingIfNeeded: st.users[Int(u)].idHash) &+ Int(truncatingIfNeeded: st.lastTimes[Int(u)])
                }
            }
            if rec.key.isPresent && rec.key.count > 0 {
                let h = v.inputBytes(rec.key).hash
                keyHashes[r] = h
                touch(h)
            }
            var lastInstall: UInt64 = 0
            for i in Int(rec.firstEvent)..<Int(rec.firstEvent + rec.eventCount) {
                let ev = v.event(i)
                guard ev.status == .live, ev.type.isTrack else { continue }
                // The install `take` will look up (for an escaped `distinct_id`, which `take` decodes, a wrong guess
                // costs one read).
                let install = ev.anonymousIDHash != 0 ? ev.anonymousIDHash : ev.distinctIDHash
                // The events of one upload are mostly one install's.
                if install == 0 || install == lastInstall { continue }
                lastInstall = install
                touch(install)
            }
        }
        warmSink &+= sink
    }

    /// Counts one event and queues it for pairing and trails.
    @inline(__always)
    private func take(_ v: BatchView, _ ev: Event, _ st: PartitionWindows, offset: Int64, index: Int, received: UInt32, newest: Int64,
                      late: Bool, output: inout OutputBuffer) {
        let (roleNumber, event) = self.role(v, ev)
        if ev.hitCount == 0 && roleNumber < 0 { return }
        let role = roleNumber < 0 ? nil : Role(rawValue: UInt8(roleNumber))
        let needsDims = ev.hitCount > 0 || role == .pageEnter
        var wanted: UInt64 = needsDims ? settings.dimsWanted : 0
        if roleNumber >= 0 { wanted |= Self.roleWanted[roleNumber] }
        finder.find(v, ev, wanted: wanted)
        let userHash = v.userHash(ev)
        let dims = needsDims ? dimsIdentity(v, ev) : -1
        if ev.hitCount > 0 { count(v, ev, st, dims, userHash, offset: offset) }
        guard let role else { return }

        let found = finder.found
        var page: Int32 = -1
        if role == .pageEnter || role == .pageLeave || role == .click {
            if ev.flags & EventFlag.ignoredPage != 0 { return }
            guard let t = v.text(ofProperty: found[0]) ?? v.text(ofProperty: found[1]) else { return }
            page = t.withDecoded { catalog.pagesText.intern($0) }
            if catalog.isIgnored(page: page) { return }
        }
        var element: Int32 = -1, rules: Int32 = -1, visitDims: Int32 = -1, version: Int32 = -1
        switch role {
        case .click:
            element = elementNumber(v)
        case .pageEnter:
            rules = ruleSet(v, ev)
            visitDims = catalog.visitDims(dims)
        case .crash:
            text.removeAll(keepingCapacity: true)
            if v.appendText(ofProperty: found[2], to: &text) || libAppVersion(v, ev, to: &text) {
                version = catalog.pagesText.intern(text)
            }
        default:
            break
        }
        // Pairing and trails are per install: its `anonymous_id` (hashed by the decoder), else its `distinct_id`
        // (wire format §5).
        let install = ev.anonymousIDHash != 0 ? ev.anonymousIDHash : userHash
        let u = st.user(hash: install, idHash: userHash, appendID: { v.appendDistinctID(ev, to: &$0) }, time: ev.time)
        if st.lastTimes[Int(u)] < ev.time { st.lastTimes[Int(u)] = ev.time }
        if st.users[Int(u)].lastReceived < received { st.users[Int(u)].lastReceived = received }
        if install == recordKey { recordKeyTaken = true }
        let e = PendingEvent(
            time: ev.time, seq: PendingEvent.sequence(offset: offset, index: index), user: u, idStart: st.users[Int(u)].idStart,
            role: role, page: page, element: element, event: event, rules: rules, dims: visitDims, appVersion: version,
            arrivalLag: arrivalLag(time: ev.time, newest: newest))
        if late { apply(e, st, record: st.ownerRecord, output: &output) } else { st.pending.push(e) }
    }

    /// The `PropertyFinder` names each role reads: 0 `$screen_name`, 1 `current_url` (pages); 2 `$app_version`
    /// (crashes); 3...7 the element fields (clicks).
    static let roleWanted: [UInt64] = [0b11, 0b11, 0b1111_1011, 0, 0, 0b100]

    /// Appends `lib.$app_version` to `out`; the events of one upload share their `lib`, so the last answer
    /// is kept for the same bytes.
    private func libAppVersion(_ v: BatchView, _ ev: Event, to out: inout [UInt8]) -> Bool {
        guard ev.lib.isPresent else { return false }
        let lib = v.jsonBytes(ev.lib)
        if !lib.equals(libMemoKey) {
            libMemoKey = lib.array
            var value: [UInt8] = []
            libMemoValue = v.appendLibAppVersion(ev, to: &value) ? value : nil
        }
        if let value = libMemoValue { out.append(contentsOf: value); return true }
        return false
    }

    /// The event's role number (`Role` raw value, -1 for none) and its name's interned number.
    @inline(__always)
    private func role(_ v: BatchView, _ ev: Event) -> (Int, Int32) {
        let name = ev.eventName
        guard name.isPresent else { return (-1, -1) }
        let bytes = v.jsonBytes(name)
        let h = ev.eventNameHash != 0 ? ev.eventNameHash : bytes.hash
        guard let k = settings.roleNames.index(of: bytes, hash: h) else { return (-1, -1) }
        let e = settings.roleOfName[k]
        return (e.role, e.event)
    }

    /// The number of the event's dims: the texts of the `by` properties (in `dimNames` order), each as a
    /// presence byte, a length and the decoded bytes, interned.
    private func dimsIdentity(_ v: BatchView, _ ev: Event) -> Int32 {
        identity.removeAll(keepingCapacity: true)
        let found = finder.found
        var slot = 8
        for n in 0..<settings.dimNames.count where n != settings.contentSlot {
            let k = found[slot]
            slot += 1
            let at = identity.count
            identity.append(1)
            identity.append(contentsOf: [0, 0, 0, 0] as [UInt8])
            var has = true
            if let t = v.text(ofProperty: k) {
                t.append(to: &identity)
            } else if n == settings.appVersionSlot {
                has = libAppVersion(v, ev, to: &identity)
            } else if let t = settings.dimNames[n].withByteView({ v.text(ofAdded: $0, ev) }) {
                // A preset or rule parameter an earlier stage added (enrichment never overwrites a client
                // property, so one sent by the client was found above).
                t.append(to: &identity)
            } else {
                has = false
            }
            if !has {
                identity.removeLast(5)
                identity.append(0)
                continue
            }
            let length = UInt32(identity.count - at - 5)
            for b in 0..<4 { identity[at + 1 + b] = UInt8(truncatingIfNeeded: length >> UInt32(8 * b)) }
        }
        let d = catalog.dimsIdentities.intern(identity)
        if Int(d) == catalog.dimsInfos.count { catalog.dimsInfos.append(makeDimsInfo(identity)) }
        return d
    }

    /// The key and JSON forms of a dims identity.
    private func makeDimsInfo(_ identity: [UInt8]) -> DimsInfo {
        var info = DimsInfo(key: [], json: [0x7B], keyContentPosition: 0, jsonContentPosition: 1)
        var i = 0
        for (n, name) in settings.dimNames.enumerated() {
            if n == settings.contentSlot {
                info.keyContentPosition = info.key.count
                info.jsonContentPosition = info.json.count
                continue
            }
            let present = identity[i] == 1
            i += 1
            guard present else { continue }
            var length = 0
            for b in 0..<4 { length |= Int(identity[i + b]) << (8 * b) }
            i += 4
            let text = Array(identity[i..<(i + length)])
            i += length
            if !info.key.isEmpty { info.key.append(0x2C) }
            info.key.append(contentsOf: name)
            info.key.append(0x3D)
            info.key.append(contentsOf: text)
            if info.json.count > 1 { info.json.append(0x2C) }
            appendJSONString(name[...], to: &info.json)
            info.json.append(0x3A)
            appendJSONString(text[...], to: &info.json)
        }
        info.json.append(0x7D)
        return info
    }

    /// Adds the event to the window aggregate of each rule it matched, in every size.
    @inline(__always)
    private func count(_ v: BatchView, _ ev: Event, _ st: PartitionWindows, _ dims: Int32, _ userHash: UInt64, offset: Int64) {
        let first = st.first
        let windowStart = first.windowStart(of: ev.time)
        let closed = max(st.closedUpTo, st.recordWatermark)
        let more = st.sizes.count > 1
        for h in Int(ev.firstHit)..<Int(ev.firstHit + ev.hitCount) {
            let hit = v.hit(h)
            let rule = v.scratchString(hit.id).withDecoded { catalog.ruleTexts.intern($0) }
            var content: Int32 = -1
            if hit.content.isPresent {
                content = (hit.contentInScratch ? v.scratchString(hit.content) : v.jsonString(hit.content)).withDecoded { catalog.contents.intern($0) }
            }
            var tuple = AggregateTuple(metric: hit.metric == .pv ? 0 : 1, rule: rule, dims: dims, content: content, windowStart: windowStart)
            catalog.add(first, st, tuple, closed: closed, offset: offset, user: userHash, duration: nil)
            // Further sizes (a loop only for pipelines that have them).
            if more {
                for size in st.sizes.dropFirst() {
                    tuple.windowStart = size.windowStart(of: ev.time)
                    catalog.add(size, st, tuple, closed: closed, offset: offset, user: userHash, duration: nil)
                }
            }
        }
    }

    /// The `elementsText` number of the click's identifier `{$element_path}-{$element_type}({position})_[{content}]`
    /// (wire format §3). The path is most of the identifier's bytes and clicks share few paths: it is numbered on
    /// its own (`pathNumber`), and the identifier looked up by that number and the short rest (`elementKeys`); the
    /// full text is built and interned only for a rest new to its path.
    private func elementNumber(_ v: BatchView) -> Int32 {
        let found = finder.found
        let path = pathNumber(v, found[3])
        identifier.removeAll(keepingCapacity: true)
        identifier.appendLE(path)
        identifier.append(0x2D)
        _ = v.appendText(ofProperty: found[4], to: &identifier)
        identifier.append(0x28)
        if !v.appendText(ofProperty: found[5], to: &identifier) { _ = v.appendText(ofProperty: found[6], to: &identifier) }
        JSONOut.appendRaw(")_[", to: &identifier)
        let k = found[7]
        if k >= 0 && v.property(k).kind == .string {
            _ = v.appendText(ofProperty: k, to: &identifier)
        } else {
            JSONOut.appendRaw("null", to: &identifier)
        }
        identifier.append(0x5D)
        let key = catalog.elementKeys.intern(identifier)
        if Int(key) < catalog.elementOfKey.count { return catalog.elementOfKey[Int(key)] }
        text.removeAll(keepingCapacity: true)
        text.append(contentsOf: catalog.elementPaths[path])
        text.append(contentsOf: identifier[4...])
        let element = catalog.elementsText.intern(text)
        catalog.elementOfKey.append(element)
        return element
    }

    /// The `elementPaths` number of a click's `$element_path` text (the empty text when it has none).
    @inline(__always)
    private func pathNumber(_ v: BatchView, _ k: Int) -> Int32 {
        guard let t = v.text(ofProperty: k) else { return catalog.elementPaths.intern([]) }
        return recentPaths.number(of: t, in: &catalog.elementPaths)
    }

    /// The interned list of the page rules a page-enter event matched (for its visit).
    private func ruleSet(_ v: BatchView, _ ev: Event) -> Int32 {
        keyBuffer.removeAll(keepingCapacity: true)
        keyBuffer.append(0x5B)
        for h in Int(ev.firstHit)..<Int(ev.firstHit + ev.hitCount) {
            let hit = v.hit(h)
            guard hit.metric == .pv else { continue }
            if keyBuffer.count > 1 { keyBuffer.append(0x2C) }
            keyBuffer.append(v.scratchBytes(hit.id))
        }
        keyBuffer.append(0x5D)
        let r = catalog.ruleSets.intern(keyBuffer)
        if Int(r) == catalog.ruleSetRules.count {
            var ids: [Int32] = []
            for h in Int(ev.firstHit)..<Int(ev.firstHit + ev.hitCount) where v.hit(h).metric == .pv {
                ids.append(v.scratchString(v.hit(h).id).withDecoded { catalog.ruleTexts.intern($0) })
            }
            catalog.ruleSetRules.append(ids)
        }
        return r
    }
}

@inline(__always) func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}
