import MaidianEvents
import MaidianPipeline

/// The aggregates side of the catalog: a contribution goes to its tuple's aggregate, whose key and head are
/// built from the combo pieces kept here. Used by event processing (counts) and emission (dwell of a closed
/// visit), so it lives with the tables it numbers.
extension WindowsCatalog {
    /// Adds one contribution to its aggregate in `size`: to the open window, or as a late contribution when the
    /// window was closed at or before `closed`.
    @inline(__always)
    func add(_ size: SizeWindows, _ st: PartitionWindows, _ tuple: AggregateTuple, closed: Int64, offset: Int64, user: UInt64, duration: Int64?) {
        if saturatingAdd(tuple.windowStart, size.window) <= closed {
            // Its window is written already: a late contribution (few events; a slower path).
            countLate(size, tuple, offset: offset, user: user, duration: duration)
            return
        }
        var a = size.aggregate(tuple)
        if a < 0 { a = aggregate(size, tuple) }
        size.aggregates[Int(a)].count += 1
        size.aggregates[Int(a)].users.insert(user)
        if let duration {
            size.aggregates[Int(a)].sum += duration
            size.aggregates[Int(a)].durations.add(duration)
        }
    }

    /// A contribution to a window the partition has closed: kept per (tuple, record offset) until the batch
    /// ends, then written as a late partial (`flushLate`).
    func countLate(_ st: SizeWindows, _ tuple: AggregateTuple, offset: Int64, user: UInt64, duration: Int64?) {
        let id = LateTuple(tuple: tuple, offset: offset)
        var a = st.lateTable[id] ?? -1
        if a < 0 {
            let c = combo(tuple)
            let pieces = combos[Int(c)]
            let keyStart = st.lateKeys.count
            st.lateKeys.append(bytesOf: comboBytes, pieces.keyPrefix)
            JSONOut.appendInt(tuple.windowStart, to: &st.lateKeys)
            st.lateKeys.append(bytesOf: comboBytes, pieces.keySuffix)
            a = Int32(st.lateAggregates.count)
            st.lateAggregates.append(Aggregate(windowEnd: saturatingAdd(tuple.windowStart, st.window), isDwell: tuple.metric == 2, combo: c,
                                               windowStart: tuple.windowStart, keyStart: Int32(keyStart),
                                               keyCount: Int32(st.lateKeys.count - keyStart)))
            st.lateOffsets.append(offset)
            st.lateTable[id] = a
        }
        st.lateAggregates[Int(a)].count += 1
        st.lateAggregates[Int(a)].users.insert(user)
        if let duration {
            st.lateAggregates[Int(a)].sum += duration
            st.lateAggregates[Int(a)].durations.add(duration)
        }
    }

    /// The aggregate of a tuple not seen yet in its window: the one of its text key, created when new.
    func aggregate(_ st: SizeWindows, _ tuple: AggregateTuple) -> Int32 {
        let c = combo(tuple)
        let pieces = combos[Int(c)]
        let end = saturatingAdd(tuple.windowStart, st.window)
        let w = st.window(end: end)
        // The key goes to the window's arena; it stays there only for a new aggregate.
        let keyStart = w.keys.count
        w.keys.append(bytesOf: comboBytes, pieces.keyPrefix)
        JSONOut.appendInt(tuple.windowStart, to: &w.keys)
        w.keys.append(bytesOf: comboBytes, pieces.keySuffix)
        let keyCount = w.keys.count - keyStart
        var h = w.keys.withByteView { $0[keyStart ..< (keyStart + keyCount)].hash }
        while let v = w.table.get(h) {
            // The other key's place read in place (a copy of the aggregate would retain its users and durations).
            let otherStart = Int(st.aggregates[Int(v)].keyStart), otherCount = Int(st.aggregates[Int(v)].keyCount)
            let same = otherCount == keyCount && w.keys.withByteView { k in
                k[otherStart ..< (otherStart + keyCount)].equals(k[keyStart ..< (keyStart + keyCount)])
            }
            if same {
                w.keys.removeLast(keyCount)
                st.addTuple(tuple, Int32(v))
                return Int32(v)
            }
            h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1  // a 64-bit collision: probe on
        }
        let agg = Aggregate(windowEnd: end, isDwell: tuple.metric == 2, combo: c, windowStart: tuple.windowStart,
                            keyStart: Int32(keyStart), keyCount: Int32(keyCount))
        let a: Int32
        if let free = st.freeAggregates.popLast() {
            a = free
            st.aggregates[Int(a)] = agg
        } else {
            a = Int32(st.aggregates.count)
            st.aggregates.append(agg)
        }
        w.table.set(h, Int64(a))
        w.list.append(a)
        st.addTuple(tuple, a)
        return a
    }

    /// The number of a tuple's combo (the tuple without its window), with its key and head pieces.
    func combo(_ tuple: AggregateTuple) -> Int32 {
        let combo = tuple.combo
        var h = combo.hash
        while let v = comboTable.get(h) {
            if combos[Int(v)].combo == combo { return Int32(v) }
            h = h &* 0x9E37_79B9_7F4A_7C15 &+ 1  // a 64-bit collision: probe on
        }
        let c = Int32(combos.count)
        comboTable.set(h, Int64(c))
        combos.append(makePieces(combo))
        return c
    }

    /// Key `{metric}|{rule}|` + window start + `|{dims}` (`content=` where "content" sorts among the dims
    /// names); head `{"metric":..,"rule":..,"window_start":` + window start + `,"window_end":` + window end +
    /// `,"dims":` + dims JSON.
    private func makePieces(_ combo: AggregateTuple) -> ComboPieces {
        let rule = ruleTexts[combo.rule]
        let metric: StaticString, dimsKey: ArraySlice<UInt8>, dimsJSON: [UInt8], content: ArraySlice<UInt8>?
        var positions = (0, 1)
        if combo.metric == 2 {
            (metric, dimsKey, dimsJSON, content) = ("dwell", dimsSets[combo.dims], dimsHeads[Int(combo.dims)], nil)
        } else {
            let info = dimsInfos[Int(combo.dims)]
            (metric, dimsKey, dimsJSON) = (combo.metric == 0 ? "pv" : "click", info.key[...], info.json)
            content = combo.content >= 0 ? contents[combo.content] : nil
            positions = (info.keyContentPosition, info.jsonContentPosition)
        }
        func piece(_ build: (inout [UInt8]) -> Void) -> Range<Int> {
            let start = comboBytes.count
            build(&comboBytes)
            return start..<comboBytes.count
        }
        let keyPrefix = piece { out in
            JSONOut.appendRaw(metric, to: &out)
            out.append(0x7C)
            out.append(contentsOf: rule)
            out.append(0x7C)
        }
        let keySuffix = piece { out in
            out.append(0x7C)
            if let content {
                let kp = dimsKey.startIndex + min(positions.0, dimsKey.count)
                out.append(contentsOf: dimsKey[..<kp])
                if kp > dimsKey.startIndex { out.append(0x2C) }
                JSONOut.appendRaw("content=", to: &out)
                out.append(contentsOf: content)
                if kp == dimsKey.startIndex && kp < dimsKey.endIndex { out.append(0x2C) }
                out.append(contentsOf: dimsKey[kp...])
            } else {
                out.append(contentsOf: dimsKey)
            }
        }
        let headPrefix = piece { out in
            JSONOut.appendRaw("{\"metric\":\"", to: &out)
            JSONOut.appendRaw(metric, to: &out)
            JSONOut.appendRaw("\",\"rule\":", to: &out)
            appendJSONString(rule, to: &out)
            JSONOut.appendRaw(",\"window_start\":", to: &out)
        }
        let headDims = piece { out in
            if let content {
                let jp = min(positions.1, dimsJSON.count - 1)
                out.append(contentsOf: dimsJSON[..<jp])
                if jp > 1 { out.append(0x2C) }
                JSONOut.appendRaw("\"content\":", to: &out)
                appendJSONString(content, to: &out)
                if jp == 1 && dimsJSON.count > 2 { out.append(0x2C) }
                out.append(contentsOf: dimsJSON[jp...])
            } else {
                out.append(contentsOf: dimsJSON)
            }
        }
        return ComboPieces(combo: combo, keyPrefix: keyPrefix, keySuffix: keySuffix, headPrefix: headPrefix, headDims: headDims)
    }

    /// The output record of an aggregate up to its counts:
    /// `{"metric":..,"rule":..,"window_start":..,"window_end":..,"dims":{..}`.
    func appendHead(_ agg: Aggregate, to out: inout [UInt8]) {
        let pieces = combos[Int(agg.combo)]
        out.append(bytesOf: comboBytes, pieces.headPrefix)
        JSONOut.appendInt(agg.windowStart, to: &out)
        JSONOut.appendRaw(",\"window_end\":", to: &out)
        JSONOut.appendInt(agg.windowEnd, to: &out)
        JSONOut.appendRaw(",\"dims\":", to: &out)
        out.append(bytesOf: comboBytes, pieces.headDims)
    }

}

/// `"..."` with the bytes escaped (JSON string).
func appendJSONString(_ bytes: ArraySlice<UInt8>, to out: inout [UInt8]) {
    out.append(0x22)
    bytes.appendEscaped(to: &out)
    out.append(0x22)
}
