#if canImport(Glibc)
import Glibc
#endif
import MaidianEvents
import MaidianPipeline

extension WindowsStage {
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        wire(&output)
        let now = ContinuousClock.now
        var touched: [PartitionWindows] = []
        for r in 0..<batch.records.count {
            let rec = batch.records[r]
            guard rec.status != .dropped else { continue }
            let st = state(rec.partition)
            if st.lastRecord < 0 || !touched.contains(where: { $0 === st }) { touched.append(st) }
            // What re-read records complete is written (and not produced again) before later records count.
            if !rec.replay && st.lastRecord >= 0 && batch.records[Int(st.lastRecord)].replay {
                advance(st, final: false, record: st.lastRecord, output: &output)
                st.ownerRecord = Int32(r)
            }
            if st.lastRecord < 0 { st.ownerRecord = Int32(r) }
            st.lastRecord = Int32(r)
            st.lastInput = now
            guard rec.eventCount > 0 else { continue }
            // Lateness is judged per record (one upload arrives at once) against the partition's watermark.
            let watermark = st.maxTime.map { $0 &- lateness }
            var newest = st.maxTime
            for i in Int(rec.firstEvent)..<Int(rec.firstEvent + rec.eventCount) {
                let ev = batch.events[i]
                guard ev.status == .live, ev.type.isTrack else { continue }
                if newest.map({ ev.time > $0 }) ?? true { newest = ev.time }
                if let watermark, ev.time < watermark {
                    batch.events[i].flags |= EventFlag.late
                    batch.addProperty(event: i, name: "$late") { JSONOut.appendRaw("true", to: &$0) }
                    lateCounter.add()
                    continue
                }
                take(&batch, i, st)
            }
            st.maxTime = newest
        }
        for st in touched {
            advance(st, final: false, record: st.ownerRecord, output: &output)
            st.lastRecord = -1
        }
    }

    /// Counts one event and queues it for pairing and trails.
    private func take(_ batch: inout EventBatch, _ i: Int, _ st: PartitionWindows) {
        let ev = batch.events[i]
        let (role, event) = self.role(batch, ev.eventName)
        if ev.hitCount == 0 && role == nil { return }
        finder.find(batch, ev, into: &found)
        let userHash = Self.userHash(batch, ev)
        if ev.hitCount > 0 || role == .pageEnter { buildDims(batch, ev) }
        if ev.hitCount > 0 { count(batch, ev, st, userHash) }
        guard let role else { return }

        var page: Int32 = -1
        if role == .pageEnter || role == .pageLeave || role == .click {
            if ev.flags & EventFlag.ignoredPage != 0 { return }
            text.removeAll(keepingCapacity: true)
            if !batch.appendText(ofProperty: found[0], to: &text) && !batch.appendText(ofProperty: found[1], to: &text) { return }
            if ignored.contains(where: { $0.count == text.count && $0 == text }) { return }
            page = pagesText.intern(text)
        }
        var element: Int32 = -1, rules: Int32 = -1, dims: Int32 = -1, version: Int32 = -1
        switch role {
        case .click:
            buildIdentifier(batch)
            element = elementsText.intern(identifier)
        case .pageEnter:
            rules = ruleSet(batch, ev)
            dims = dimsSets.intern(dimsKey)
            if Int(dims) == dimsHeads.count { dimsHeads.append(dimsJSON) }
        case .crash:
            text.removeAll(keepingCapacity: true)
            if batch.appendText(ofProperty: found[2], to: &text) || libAppVersion(batch, ev) {
                version = pagesText.intern(text)
            }
        default:
            break
        }
        let u = st.user(hash: userHash, id: {
            var id: [UInt8] = []
            batch.appendDistinctID(ev, to: &id)
            return id
        }, time: ev.time)
        if st.users[Int(u)].lastTime < ev.time { st.users[Int(u)].lastTime = ev.time }
        st.seq += 1
        st.pending.push(PendingEvent(
            time: ev.time, seq: st.seq, user: u, role: role, page: page, element: element, event: event,
            rules: rules, dims: dims, appVersion: version))
    }

    /// Appends `lib.$app_version` to `text`; the events of one upload share their `lib`, so the last answer
    /// is kept for the same bytes.
    private func libAppVersion(_ batch: borrowing EventBatch, _ ev: Event) -> Bool {
        guard ev.lib.isPresent else { return false }
        let lo = Int(ev.lib.start), hi = Int(ev.lib.end)
        let same = libMemoKey.count == hi - lo && batch.json.withUnsafeBufferPointer { j in
            libMemoKey.withUnsafeBufferPointer { m in memcmp(j.baseAddress! + lo, m.baseAddress!, hi - lo) == 0 }
        }
        if same {
            if let v = libMemoValue { text.append(contentsOf: v); return true }
            return false
        }
        libMemoKey = Array(batch.json[lo..<hi])
        var v: [UInt8] = []
        libMemoValue = batch.appendLibAppVersion(ev, to: &v) ? v : nil
        if let v = libMemoValue { text.append(contentsOf: v); return true }
        return false
    }

    /// Hash64 of the decoded `distinct_id` (users are counted by it, across partitions and workers).
    static func userHash(_ batch: borrowing EventBatch, _ ev: Event) -> UInt64 {
        var h = Hash64()
        if ev.distinctIDEscaped {
            var id: [UInt8] = []
            batch.appendDistinctID(ev, to: &id)
            id.withUnsafeBufferPointer { if let b = $0.baseAddress { h.add(b, $0.count) } }
        } else {
            batch.json.withUnsafeBufferPointer { j in h.add(j.baseAddress! + Int(ev.distinctID.start), ev.distinctID.count) }
        }
        return h.value
    }

    /// The event's role and its name's interned number (role names are interned up front).
    private func role(_ batch: borrowing EventBatch, _ name: Span) -> (Role?, Int32) {
        guard name.isPresent else { return (nil, -1) }
        let lo = Int(name.start), n = name.count
        for (r, names) in roleNames.enumerated() {
            for (i, want) in names.enumerated() where want.count == n {
                var equal = true
                for k in 0..<n where batch.json[lo + k] != want[k] { equal = false; break }
                if equal { return (Role(rawValue: UInt8(r)), roleEventIDs[r][i]) }
            }
        }
        return (nil, -1)
    }

    /// The event's dims: `dimsKey` (`k=v,...` without content) and `dimsJSON` (`{"k":"v",...}`).
    private func buildDims(_ batch: borrowing EventBatch, _ ev: Event) {
        dimsKey.removeAll(keepingCapacity: true)
        dimsJSON.removeAll(keepingCapacity: true)
        dimsJSON.append(0x7B)
        var slot = 8
        for (n, name) in dimNames.enumerated() {
            if n == contentSlot {
                contentKeyPosition = dimsKey.count
                contentJSONPosition = dimsJSON.count
                continue
            }
            text.removeAll(keepingCapacity: true)
            let k = found[slot]
            slot += 1
            var has = batch.appendText(ofProperty: k, to: &text)
            if !has && n == appVersionSlot { has = libAppVersion(batch, ev) }
            guard has else { continue }
            if !dimsKey.isEmpty { dimsKey.append(0x2C) }
            dimsKey.append(contentsOf: name)
            dimsKey.append(0x3D)
            dimsKey.append(contentsOf: text)
            if dimsJSON.count > 1 { dimsJSON.append(0x2C) }
            appendJSONString(name, to: &dimsJSON)
            dimsJSON.append(0x3A)
            appendJSONString(text, to: &dimsJSON)
        }
        dimsJSON.append(0x7D)
    }

    private func appendJSONString(_ bytes: [UInt8], to out: inout [UInt8]) {
        out.append(0x22)
        bytes.withUnsafeBytes { JSONOut.appendEscaped($0, to: &out) }
        out.append(0x22)
    }

    /// Adds the event to the window aggregate of each rule it matched.
    private func count(_ batch: borrowing EventBatch, _ ev: Event, _ st: PartitionWindows, _ userHash: UInt64) {
        let windowStart = floorDiv(ev.time, window) * window
        for h in Int(ev.firstHit)..<Int(ev.firstHit + ev.hitCount) {
            let hit = batch.hits[h]
            var content: [UInt8]? = nil
            if hit.content.isPresent {
                var c: [UInt8] = []
                batch.appendStringText(hit.contentInScratch ? batch.scratch : batch.json, hit.content, escaped: false, to: &c)
                content = c
            }
            text.removeAll(keepingCapacity: true)
            batch.appendStringText(batch.scratch, hit.id, escaped: false, to: &text)
            let metric: StaticString = hit.metric == .pv ? "pv" : "click"
            let a = aggregate(st, metric: metric, rule: text, windowStart: windowStart, dimsKey: dimsKey, dimsJSON: dimsJSON, content: content)
            st.aggregates[Int(a)].count += 1
            st.aggregates[Int(a)].users.insert(userHash)
        }
    }

    /// The aggregate of a key, created with its output head when new.
    func aggregate(_ st: PartitionWindows, metric: StaticString, rule: [UInt8], windowStart: Int64,
                   dimsKey: [UInt8], dimsJSON: [UInt8], content: [UInt8]?) -> Int32 {
        keyBuffer.removeAll(keepingCapacity: true)
        JSONOut.appendRaw(metric, to: &keyBuffer)
        keyBuffer.append(0x7C)
        keyBuffer.append(contentsOf: rule)
        keyBuffer.append(0x7C)
        JSONOut.appendInt(windowStart, to: &keyBuffer)
        keyBuffer.append(0x7C)
        var dimsOut = dimsJSON
        if let content {
            // `content=` goes where "content" sorts among the dims names.
            let kp = min(contentKeyPosition, dimsKey.count), jp = min(contentJSONPosition, dimsJSON.count - 1)
            keyBuffer.append(contentsOf: dimsKey[..<kp])
            if kp > 0 { keyBuffer.append(0x2C) }
            JSONOut.appendRaw("content=", to: &keyBuffer)
            keyBuffer.append(contentsOf: content)
            if kp == 0 && kp < dimsKey.count { keyBuffer.append(0x2C) }
            keyBuffer.append(contentsOf: dimsKey[kp...])
            dimsOut = Array(dimsJSON[..<jp])
            if jp > 1 { dimsOut.append(0x2C) }
            JSONOut.appendRaw("\"content\":", to: &dimsOut)
            appendJSONString(content, to: &dimsOut)
            if jp == 1 && dimsJSON.count > 2 { dimsOut.append(0x2C) }
            dimsOut.append(contentsOf: dimsJSON[jp...])
        } else {
            keyBuffer.append(contentsOf: dimsKey)
        }
        var hasher = Hash64()
        keyBuffer.withUnsafeBufferPointer { hasher.add($0.baseAddress!, $0.count) }
        var h = hasher.value
        let end = windowStart + window
        if let w = st.windows[end] {
            while let v = w.table.get(h) {
                if st.aggregates[Int(v)].key == keyBuffer { return Int32(v) }
                h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1  // a 64-bit collision: probe on
            }
        }
        var head: [UInt8] = []
        JSONOut.appendRaw("{\"metric\":\"", to: &head)
        JSONOut.appendRaw(metric, to: &head)
        JSONOut.appendRaw("\",\"rule\":", to: &head)
        appendJSONString(rule, to: &head)
        JSONOut.appendRaw(",\"window_start\":", to: &head)
        JSONOut.appendInt(windowStart, to: &head)
        JSONOut.appendRaw(",\"window_end\":", to: &head)
        JSONOut.appendInt(windowStart + window, to: &head)
        JSONOut.appendRaw(",\"dims\":", to: &head)
        head.append(contentsOf: dimsOut)
        let agg = Aggregate(key: keyBuffer, head: head, windowEnd: windowStart + window, isDwell: metric.utf8Start[0] == 0x64)
        let a: Int32
        if let free = st.freeAggregates.popLast() {
            a = free
            st.aggregates[Int(a)] = agg
        } else {
            a = Int32(st.aggregates.count)
            st.aggregates.append(agg)
        }
        let w: WindowAggregates
        if let existing = st.windows[end] { w = existing } else { w = WindowAggregates(); st.windows[end] = w }
        w.table.set(h, Int64(a))
        w.list.append(a)
        return a
    }

    /// `{$element_path}-{$element_type}({position})_[{content}]` (SPEC section 3) into `identifier`.
    private func buildIdentifier(_ batch: borrowing EventBatch) {
        identifier.removeAll(keepingCapacity: true)
        _ = batch.appendText(ofProperty: found[3], to: &identifier)
        identifier.append(0x2D)
        _ = batch.appendText(ofProperty: found[4], to: &identifier)
        identifier.append(0x28)
        if !batch.appendText(ofProperty: found[5], to: &identifier) { _ = batch.appendText(ofProperty: found[6], to: &identifier) }
        JSONOut.appendRaw(")_[", to: &identifier)
        let k = found[7]
        if k >= 0 && batch.properties[k].kind == .string {
            _ = batch.appendText(ofProperty: k, to: &identifier)
        } else {
            JSONOut.appendRaw("null", to: &identifier)
        }
        identifier.append(0x5D)
    }

    /// The interned list of the page rules a page-enter event matched (for its visit).
    private func ruleSet(_ batch: borrowing EventBatch, _ ev: Event) -> Int32 {
        keyBuffer.removeAll(keepingCapacity: true)
        keyBuffer.append(0x5B)
        for h in Int(ev.firstHit)..<Int(ev.firstHit + ev.hitCount) {
            let hit = batch.hits[h]
            guard hit.metric == .pv else { continue }
            if keyBuffer.count > 1 { keyBuffer.append(0x2C) }
            keyBuffer.append(contentsOf: batch.scratch[Int(hit.id.start)..<Int(hit.id.end)])
        }
        keyBuffer.append(0x5D)
        let r = ruleSets.intern(keyBuffer)
        if Int(r) == ruleSetIDs.count {
            var ids: [[UInt8]] = []
            for h in Int(ev.firstHit)..<Int(ev.firstHit + ev.hitCount) where batch.hits[h].metric == .pv {
                var id: [UInt8] = []
                batch.appendStringText(batch.scratch, batch.hits[h].id, escaped: false, to: &id)
                ids.append(id)
            }
            ruleSetIDs.append(ids)
        }
        return r
    }
}

@inline(__always) func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}

