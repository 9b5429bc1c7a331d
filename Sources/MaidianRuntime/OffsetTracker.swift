/// Tracks which input records have every derived output delivered, so that an offset is stored only after
/// all its outputs are safe (at-least-once: wire format §5, "nothing lost").
///
/// Records get increasing sequence numbers; delivery tokens are those numbers. Offsets advance over the
/// completed prefix only, so a record whose output failed holds back every later offset of the worker.
/// Only commit points move a partition's offset: stateful stages attribute what a batch completes (closed
/// windows, visits, merged counts) to the partition's last record in the batch, so an offset inside a
/// batch could be committed while outputs caused by the records before it are still undelivered.
/// Not thread-safe: the worker registers records and the sender thread counts delivery reports down, both
/// under `OutputSender`'s lock (`withLedger`).
final class OffsetTracker {
    struct Entry {
        var partition: Slot
        var offset: Int64
        var remaining: Int32
        /// The partition's offset may move to just after this record.
        var commitPoint: Bool
    }

    /// Token for outputs that belong to no single record (state written at the end of a run).
    static let stateToken: UInt64 = 0

    private var entries: [Entry] = []
    private var head = 0
    /// Sequence number of `entries[head]`.
    private var headSeq: UInt64 = 1
    private(set) var pendingStateOutputs = 0
    /// Next offset to store per partition, for partitions that advanced since the last `takeAdvanced`.
    private var advanced: [Slot: Int64] = [:]
    private(set) var firstFailure: String?

    /// Records in flight (not yet complete).
    var inFlight: Int { entries.count - head }

    /// Registers a record; returns its token. `outputs` may be 0 (then it completes at once). `commitPoint`:
    /// the partition's last record in its batch.
    func add(partition: Slot, offset: Int64, outputs: Int32, commitPoint: Bool = true) -> UInt64 {
        let seq = headSeq + UInt64(entries.count - head)
        entries.append(Entry(partition: partition, offset: offset, remaining: outputs, commitPoint: commitPoint))
        return seq
    }

    /// A record gained outputs after it was registered.
    func addOutputs(token: UInt64, _ n: Int32) {
        if token == OffsetTracker.stateToken { pendingStateOutputs += Int(n); return }
        let i = head + Int(token - headSeq)
        entries[i].remaining += n
    }

    /// The partition and offset of the record a token was given for; nil for state outputs and completed records.
    func record(token: UInt64) -> (partition: Slot, offset: Int64)? {
        guard token != OffsetTracker.stateToken, token >= headSeq else { return nil }
        let i = head + Int(token - headSeq)
        guard i < entries.count else { return nil }
        return (entries[i].partition, entries[i].offset)
    }

    /// A delivery report.
    func delivered(token: UInt64, error: String?) {
        if let error {
            if firstFailure == nil { firstFailure = error }
            return  // never completes: offsets stop before it
        }
        if token == OffsetTracker.stateToken { pendingStateOutputs -= 1; return }
        guard token >= headSeq else { return }
        let i = head + Int(token - headSeq)
        guard i < entries.count else { return }
        entries[i].remaining -= 1
    }

    /// Pops the completed prefix, remembering the next offset to store per partition.
    func advance() {
        while head < entries.count && entries[head].remaining <= 0 {
            let e = entries[head]
            if e.commitPoint { advanced[e.partition] = e.offset + 1 }
            head += 1
            headSeq += 1
        }
        if head > 4096 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// Partitions whose stored offset should move, with the next offset to read; clears the list.
    func takeAdvanced() -> [Slot: Int64] {
        defer { advanced.removeAll(keepingCapacity: true) }
        return advanced
    }

    /// Whether every registered record and state output is delivered.
    var isIdle: Bool { head == entries.count && pendingStateOutputs == 0 }
}
