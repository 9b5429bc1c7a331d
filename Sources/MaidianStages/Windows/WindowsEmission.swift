import MaidianEvents
import MaidianPipeline

extension WindowsProcessor {
    /// After a partition's input moved on: pair what the watermark passed, expire visits, write the windows
    /// the watermark closed and tell the mergers how far this partition is. `final`: the end of a bounded run.
    func advance(_ st: PartitionWindows, final: Bool, record: Int32, output: inout OutputBuffer) {
        defer { emitter.flushInternal(output: &output) }
        if st.idleSent && !final {
            st.idleSent = false
            st.progressSent = .min  // report the real watermark again
        }
        let watermark = st.maxTime.map { saturatingSub($0, settings.lateness) }
        if final {
            drain(st, upTo: .max, record: record, output: &output)
            if let watermark { sweep(st, watermark: watermark, record: record, output: &output) }
            closeAll(st, by: "end_of_input", record: record, output: &output)
            emitter.flushLate(st, record: record, output: &output)
            emitter.closeWindows(st, upTo: .max, record: record, output: &output)
            emitter.sendProgress(st, .max, idle: false, record: record, output: &output)
            return
        }
        guard let watermark else { return }
        drain(st, upTo: watermark, record: record, output: &output)
        if st.hasLate { emitter.flushLate(st, record: record, output: &output) }
        // Sweeps happen at the record whose watermark entered a new minute (`sweepIfDue`), not here.
        emitter.closeWindows(st, upTo: watermark, record: record, output: &output)
        if st.progressSent == .min || floorDiv(watermark, settings.progressEvery) > floorDiv(st.progressSent, settings.progressEvery) {
            emitter.sendProgress(st, watermark, idle: false, record: record, output: &output)
        }
    }

    /// Pairs the queued events at or before `time`, in event-time order. They are taken off the heap first
    /// (pairing never queues), then each one's install state is read in one loop before any is paired: the
    /// installs are scattered in memory and those reads, with no wait for one another, overlap their cache
    /// misses, where pairing would wait for each in turn.
    func drain(_ st: PartitionWindows, upTo time: Int64, record: Int32, output: inout OutputBuffer) {
        guard let top = st.pending.topTime, top <= time else { return }
        drained.removeAll(keepingCapacity: true)
        st.pending.pop(upTo: time, into: &drained)
        var sink = 0
        let users = st.users  // one reference for the loop, not a look-up through the state per event
        for e in drained {
            sink &+= users[Int(e.user)].visits.count &+ users[Int(e.user)].trail.count
        }
        warmSink &+= sink
        for e in drained { apply(e, st, record: record, output: &output) }
    }

    /// Sweeps visits once the partition's watermark `watermark` (after the record just taken) entered a minute
    /// not swept yet: called per record, so that the sweep falls at the same record whatever the batches. At
    /// a batch's end it used to see the collector time (`collectorNow`) of the batch's last record, so where
    /// batches ended decided which silent installs' visits timed out at that minute: a re-read after a takeover,
    /// cut into other batches, closed a visit at a re-read record (its outputs not produced) that the first run
    /// closed only after its commit, and nobody wrote it. What the watermark passed is paired first, as at a
    /// batch's end.
    @inline(__always)
    func sweepIfDue(_ st: PartitionWindows, watermark: Int64, record: Int32, output: inout OutputBuffer) {
        let bucket = alignedStart(watermark, every: Self.sweepEvery)
        guard bucket > st.lastSweep else { return }
        sweepMinute(st, watermark: watermark, bucket: bucket, record: record, output: &output)
    }

    @inline(never)
    private func sweepMinute(_ st: PartitionWindows, watermark: Int64, bucket: Int64, record: Int32, output: inout OutputBuffer) {
        drain(st, upTo: watermark, record: record, output: &output)
        st.lastSweep = bucket
        // At the start of the watermark's minute, not at the watermark itself: the same visits time out whatever
        // the watermark within the minute. Every minute whatever the window sizes: dwell records do not depend on
        // them.
        sweep(st, watermark: bucket, record: record, output: &output)
    }

    /// How often (in watermark time) visits are swept for timeouts: the default window, so that the sweeps of
    /// a one-minute pipeline stay where they were.
    static let sweepEvery: Int64 = 60_000

    /// Times out visits the watermark has passed of installs silent for the timeout in collector time (an
    /// install that is still uploading may be sending its cached events: its own clock decides, in `apply`),
    /// and forgets installs with nothing left to need.
    private func sweep(_ st: PartitionWindows, watermark: Int64, record: Int32, output: inout OutputBuffer) {
        let silentBefore = saturatingSub(st.collectorNow, settings.visitTimeout)
        for u in st.liveUsers where Int64(st.users[Int(u)].lastReceived) * 1000 <= silentBefore {
            timeOut(st, u, now: watermark, record: record, output: &output)
        }
        st.expireUsers(before: saturatingSub(watermark, max(settings.trailMaxAge, settings.visitTimeout)))
    }

    private func timeOut(_ st: PartitionWindows, _ u: Int32, now: Int64, record: Int32, output: inout OutputBuffer) {
        var k = 0
        while k < st.users[Int(u)].visits.count {
            let v = st.users[Int(u)].visits[k]
            if saturatingAdd(v.enter, settings.visitTimeout) < now {
                st.users[Int(u)].visits.remove(at: k)
                emitter.close(st, u, v, by: "timeout", at: nil, closer: nil, record: record, output: &output)
            } else {
                k += 1
            }
        }
    }

    /// One event in event-time order: the pairing rules of wire format §5 and the crash trail.
    func apply(_ e: PendingEvent, _ st: PartitionWindows, record: Int32, output: inout OutputBuffer) {
        let u = e.user
        timeOut(st, u, now: e.time, record: record, output: &output)
        switch e.role {
        case .pageEnter:
            if let k = st.users[Int(u)].visits.firstIndex(where: { $0.page == e.page }) {
                let old = st.users[Int(u)].visits.remove(at: k)
                emitter.close(st, u, old, by: "reenter", at: nil, closer: e, record: record, output: &output)
            }
            st.users[Int(u)].visits.append(Visit(page: e.page, rules: e.rules, dims: e.dims, idStart: e.idStart, enter: e.time))
            addToTrail(st, u, e)
        case .pageLeave:
            if let k = st.users[Int(u)].visits.firstIndex(where: { $0.page == e.page }) {
                let v = st.users[Int(u)].visits.remove(at: k)
                emitter.close(st, u, v, by: "leave", at: e.time, closer: e, record: record, output: &output)
            } else {
                orphanCounter.add()
            }
        case .click:
            addToTrail(st, u, e)
        case .appStart:
            closeAll(st, u, by: "restart", at: nil, closer: e, record: record, output: &output)
        case .appEnd:
            closeAll(st, u, by: "app_end", at: e.time, closer: e, record: record, output: &output)
        case .crash:
            closeAll(st, u, by: "crash", at: e.time, closer: e, record: record, output: &output)
            emitter.writeTrail(st, u, e, record: record, output: &output)
        }
        if st.lastTimes[Int(u)] < e.time { st.lastTimes[Int(u)] = e.time }
    }

    private func closeAll(_ st: PartitionWindows, _ u: Int32, by: StaticString, at time: Int64?, closer: PendingEvent?, record: Int32, output: inout OutputBuffer) {
        let visits = st.users[Int(u)].visits
        st.users[Int(u)].visits.removeAll()
        for v in visits { emitter.close(st, u, v, by: by, at: time, closer: closer, record: record, output: &output) }
    }

    /// End of input: every visit still open.
    private func closeAll(_ st: PartitionWindows, by: StaticString, record: Int32, output: inout OutputBuffer) {
        for u in st.liveUsers {
            closeAll(st, u, by: by, at: nil, closer: nil, record: record, output: &output)
        }
    }

    private func addToTrail(_ st: PartitionWindows, _ u: Int32, _ e: PendingEvent) {
        let length = settings.trailLength
        guard length > 0 else { return }
        let entry = TrailEntry(time: e.time, event: e.event, page: e.page, element: e.element, arrivalLag: e.arrivalLag)
        let count = st.users[Int(u)].trail.count
        if count < length {
            // Grown by doubling up to the trail's length, not past it (a full trail is most users' state).
            if count == st.users[Int(u)].trail.capacity { st.users[Int(u)].trail.reserveCapacity(min(length, max(1, 2 * count))) }
            st.users[Int(u)].trail.append(entry)
        } else {
            // Full: the oldest entry makes room.
            let oldest = Int(st.users[Int(u)].trailStart)
            st.users[Int(u)].trail[oldest] = entry
            st.users[Int(u)].trailStart = Int32(oldest + 1 == length ? 0 : oldest + 1)
        }
    }
}

/// Writes what the windows stage produces: dwell records of closed visits, crash trails, the partials of
/// closed windows and late contributions, and progress, to the topics and partitions wired at the start.
/// Reads the catalog for record heads; owns only its output wiring, counters and head buffer.
final class WindowsEmitter {
    let catalog: WindowsCatalog
    let settings: WindowsSettings
    let dwellTopic: String
    let trailsTopic: String
    /// The internal topic: the one `connect` names, else `partials_topic`, else `maidian.partials`.
    var partialsName: String
    var partialsPartitions: Int32 = 1
    var topicPartials: Int32 = -1
    var topicDwell: Int32 = -1
    var topicTrails: Int32 = -1
    let visitsCounter: StageCounter
    let trailsCounter: StageCounter
    let idleCounter: StageCounter
    @exclusivity(unchecked) var headBuffer: [UInt8] = []
    /// A closing window's aggregates with where their keys are in the window's `keys` (`closeWindow`).
    @exclusivity(unchecked) var order: [(start: Int32, end: Int32, aggregate: Int32)] = []
    /// The internal messages of the current advance, written per internal partition by `flushInternal`.
    @exclusivity(unchecked) var bundler = InternalBundler()

    init(catalog: WindowsCatalog, settings: WindowsSettings, config: WindowsStage.Config, context: StageContext) {
        self.catalog = catalog
        self.settings = settings
        dwellTopic = config.dwellTopic
        trailsTopic = config.trailsTopic
        partialsName = config.partialsTopic ?? "maidian.partials"
        visitsCounter = context.counter("visits_closed")
        trailsCounter = context.counter("trails")
        idleCounter = context.counter("idle_partitions")
    }

    /// Looks up the output topics' numbers once, at the first batch (the buffer numbers topics as they come).
    func wire(_ output: inout OutputBuffer) {
        if topicDwell < 0 {
            topicDwell = output.topicIndex(dwellTopic)
            topicTrails = output.topicIndex(trailsTopic)
            topicPartials = output.topicIndex(partialsName)
        }
    }

    /// A closed visit: its `metrics.dwell` record (with the `distinct_id` of the event that closed it, else of
    /// its page-enter), and for `leave` and `app_end` its share of the dwell aggregates of each page rule of the
    /// visit, in the window of the leave time.
    func close(_ st: PartitionWindows, _ u: Int32, _ v: Visit, by: StaticString, at time: Int64?, closer: PendingEvent?,
                       record: Int32, output: inout OutputBuffer) {
        visitsCounter.add()
        let idStart = closer?.idStart ?? v.idStart
        let (keyStart, valueStart) = beginUserRecord(st, idStart: idStart, &output)
        let head = catalog.visitHead(page: v.page, rules: v.rules)
        output.bytes.append(bytesOf: catalog.visitHeadBytes, head)
        JSONOut.appendInt(v.enter, to: &output.bytes)
        if let time {
            JSONOut.appendRaw(",\"leave_time\":", to: &output.bytes)
            JSONOut.appendInt(time, to: &output.bytes)
            JSONOut.appendRaw(",\"duration_ms\":", to: &output.bytes)
            JSONOut.appendInt(time - v.enter, to: &output.bytes)
        }
        JSONOut.appendRaw(",\"closed_by\":\"", to: &output.bytes)
        JSONOut.appendRaw(by, to: &output.bytes)
        JSONOut.appendRaw("\"}", to: &output.bytes)
        output.finish(topic: topicDwell, record: record, keyStart: keyStart, valueStart: valueStart)

        guard let time, by.utf8CodeUnitCount == 5 || by.utf8CodeUnitCount == 7,
              by.utf8Start[0] == 0x6C || by.utf8Start[0] == 0x61 else { return }  // "leave" or "app_end"
        let duration = time &- v.enter
        // Users are counted by the closing event's distinct_id (as pv and click count theirs).
        let userHash = st.withID(start: idStart) { $0.hash }
        let closed = max(st.closedUpTo, st.recordWatermark)
        let offset = closer?.offset ?? -1
        // The visit is written once; its duration goes into the windows of every size.
        for size in st.sizes {
            let windowStart = size.windowStart(of: time)
            for rule in catalog.ruleSetRules[Int(v.rules)] {
                let tuple = AggregateTuple(metric: 2, rule: rule, dims: v.dims, content: -1, windowStart: windowStart)
                catalog.add(size, st, tuple, closed: closed, offset: offset, user: userHash, duration: duration)
            }
        }
    }

    func writeTrail(_ st: PartitionWindows, _ u: Int32, _ e: PendingEvent, record: Int32, output: inout OutputBuffer) {
        trailsCounter.add()
        let user = st.users[Int(u)]
        let (keyStart, valueStart) = beginUserRecord(st, idStart: e.idStart, &output)
        JSONOut.appendRaw(",\"crash_time\":", to: &output.bytes)
        JSONOut.appendInt(e.time, to: &output.bytes)
        JSONOut.appendRaw(",\"app_version\":", to: &output.bytes)
        if e.appVersion >= 0 { appendJSONString(catalog.pagesText[e.appVersion], to: &output.bytes) } else { JSONOut.appendRaw("null", to: &output.bytes) }
        JSONOut.appendRaw(",\"trail\":[", to: &output.bytes)
        var first = true
        let n = user.trail.count, start = Int(user.trailStart)
        // Entries reach `trail_max_age` back from the crash. For a crash that arrived late (applied at its
        // record, whose watermark is set meanwhile), also only entries that arrived (in the partition's clock)
        // at most `trail_max_age` before that watermark: a new owner of the partition rebuilds only the entries
        // of the input it re-reads (the state horizon, `lateness + trail_max_age` behind the newest time), so
        // older arrivals, still known to a worker that never stopped, would make its trail differ from the one
        // a takeover writes (docs/recovery.md §2). A late upload's own earlier events arrived with it.
        let oldest = saturatingSub(e.time, settings.trailMaxAge)
        let arrivedSince = st.recordWatermark == .min ? Int64.min : saturatingSub(st.recordWatermark, settings.trailMaxAge)
        for k in 0..<n {
            let t = user.trail[start + k < n ? start + k : start + k - n]
            guard t.time >= oldest, saturatingAdd(t.time, Int64(t.arrivalLag)) >= arrivedSince else { continue }
            if !first { output.bytes.append(0x2C) }
            first = false
            JSONOut.appendRaw("{\"time\":", to: &output.bytes)
            JSONOut.appendInt(t.time, to: &output.bytes)
            JSONOut.appendRaw(",\"event\":", to: &output.bytes)
            appendJSONString(catalog.eventNames[t.event], to: &output.bytes)
            JSONOut.appendRaw(",\"page\":", to: &output.bytes)
            appendJSONString(catalog.pagesText[t.page], to: &output.bytes)
            if t.element >= 0 {
                JSONOut.appendRaw(",\"element\":", to: &output.bytes)
                appendJSONString(catalog.elementsText[t.element], to: &output.bytes)
            }
            output.bytes.append(0x7D)
        }
        JSONOut.appendRaw("]}", to: &output.bytes)
        output.finish(topic: topicTrails, record: record, keyStart: keyStart, valueStart: valueStart)
    }

    /// Starts a record keyed by a `distinct_id` whose value opens with `{"distinct_id":...`.
    private func beginUserRecord(_ st: PartitionWindows, idStart: UInt32, _ output: inout OutputBuffer) -> (Int, Int) {
        let keyStart = output.begin()
        let valueStart = st.withID(start: idStart) { id in
            output.bytes.append(id)
            let valueStart = output.bytes.count
            JSONOut.appendRaw("{\"distinct_id\":\"", to: &output.bytes)
            id.appendEscaped(to: &output.bytes)
            output.bytes.append(0x22)
            return valueStart
        }
        return (keyStart, valueStart)
    }


    /// Writes the partials of the windows ending at or before `end`, oldest first.
    func closeWindows(_ st: PartitionWindows, upTo end: Int64, record: Int32, output: inout OutputBuffer) {
        for size in st.sizes {
            var closed = false
            for e in size.windows.keys.sorted() where e <= end {
                closeWindow(st, size, end: e, record: record, output: &output)
                closed = true
            }
            // Before any new aggregate can take a freed slot.
            if closed { size.dropClosedTuples() }
        }
        if end > st.closedUpTo { st.closedUpTo = end }
    }

    /// Writes the partials of one window of the partition to the internal topic and forgets them.
    private func closeWindow(_ st: PartitionWindows, _ size: SizeWindows, end: Int64, record: Int32, output: inout OutputBuffer) {
        size.lastWindow = nil
        guard let w = size.windows.removeValue(forKey: end) else { return }
        let keys = w.keys
        keys.withByteView { k in
            @inline(__always) func key(_ a: Aggregate) -> ByteView { k[Int(a.keyStart) ..< Int(a.keyStart + a.keyCount)] }
            // Output in key order (keys are distinct within a window). Sorted by where the keys are, read once
            // from the aggregates: a comparison then reads only the keys.
            order.removeAll(keepingCapacity: true)
            for a in w.list {
                // Two fields read in place (a copy of the aggregate would retain its user set and durations).
                let start = size.aggregates[Int(a)].keyStart, count = size.aggregates[Int(a)].keyCount
                order.append((start, start + count, a))
            }
            order.sort { x, y in k[Int(x.start) ..< Int(x.end)].precedes(k[Int(y.start) ..< Int(y.end)]) }
            for (_, _, a) in order {
                // Moved out, its slot left vacant (it is free from now on): no retain of its users and durations
                // for a copy, and their memory goes with `agg`.
                var agg = Aggregate.vacant
                swap(&agg, &size.aggregates[Int(a)])
                writePartial(agg, key: key(agg), sourcePartition: st.partition, size: size.tag, lateOffset: nil, record: record, output: &output)
            }
        }
        size.freeAggregates.append(contentsOf: w.list)
    }

    /// Writes one aggregate as a partial record of the internal topic, on the partition its key hashes to, so
    /// every source's partial of a key reaches the same merger. `lateOffset` makes it a late partial.
    private func writePartial(_ agg: Aggregate, key: ByteView, sourcePartition: Int32, size: Int64, lateOffset: Int64?,
                              record: Int32, output: inout OutputBuffer) {
        headBuffer.removeAll(keepingCapacity: true)
        catalog.appendHead(agg, to: &headBuffer)
        let target = Int32(truncatingIfNeeded: StableHash.fnv1a(key) % UInt64(partialsPartitions))
        headBuffer.withByteView { head in
            bundler.add(partition: target, record: record, key: key, output: &output, topic: topicPartials) { out in
                InternalMessage.encodePartial(sourcePartition: sourcePartition, windowEnd: agg.windowEnd, head: head, count: agg.count,
                                              isDwell: agg.isDwell, sumMs: agg.sum, durations: agg.durations, size: size,
                                              lateOffset: lateOffset, into: &out) { agg.users.encode(into: &$0) }
            }
        }
    }

    /// Writes the internal messages collected since the last call (one record per internal partition). Called
    /// at the end of each advance of a partition, whose messages all belong to one input record.
    func flushInternal(output: inout OutputBuffer) {
        bundler.flush(output: &output, topic: topicPartials)
    }

    /// Writes the batch's late contributions as late partials (one per key and record offset, in key order)
    /// and forgets them: the merger adds them to the windows it has written.
    func flushLate(_ st: PartitionWindows, record: Int32, output: inout OutputBuffer) {
        for size in st.sizes where !size.lateAggregates.isEmpty { flushLate(st, size, record: record, output: &output) }
    }

    private func flushLate(_ part: PartitionWindows, _ st: SizeWindows, record: Int32, output: inout OutputBuffer) {
        st.lateKeys.withByteView { k in
            @inline(__always) func key(_ a: Aggregate) -> ByteView { k[Int(a.keyStart) ..< Int(a.keyStart + a.keyCount)] }
            let order = st.lateAggregates.indices.sorted { x, y in
                let a = key(st.lateAggregates[x]), b = key(st.lateAggregates[y])
                if a.precedes(b) { return true }
                if b.precedes(a) { return false }
                return st.lateOffsets[x] < st.lateOffsets[y]
            }
            for i in order {
                let agg = st.lateAggregates[i]
                writePartial(agg, key: key(agg), sourcePartition: part.partition, size: st.tag, lateOffset: st.lateOffsets[i],
                             record: record, output: &output)
            }
        }
        st.lateAggregates.removeAll(keepingCapacity: true)
        st.lateOffsets.removeAll(keepingCapacity: true)
        st.lateKeys.removeAll(keepingCapacity: true)
        st.lateTable.removeAll(keepingCapacity: true)
    }

    func sendProgress(_ st: PartitionWindows, _ watermark: Int64, idle: Bool, record: Int32, output: inout OutputBuffer) {
        st.progressSent = watermark
        // Encoded once for every internal partition: a worker holding P source partitions of a topic with Q
        // internal partitions sends P × Q of these per window length of event time.
        var item: [UInt8] = []
        item.reserveCapacity(16)
        InternalMessage.progress(source: st.partition, watermark: watermark, idle: idle).encode(into: &item)
        for q in 0..<partialsPartitions {
            bundler.add(partition: q, record: record, key: nil, output: &output, topic: topicPartials) { $0.append(contentsOf: item) }
        }
    }
}
