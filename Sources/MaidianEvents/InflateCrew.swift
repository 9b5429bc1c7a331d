import Foundation

/// One zstd record value of a batch that `RecordDecoder` planned to decompress on several threads: where its
/// compressed bytes are in the batch's input, where its output goes in the JSON arena, and whether that worked.
struct InflateEntry {
    /// The record's index in the batch.
    var record: Int32
    /// Its compressed value in the batch's input arena.
    var inputStart: Int
    var inputEnd: Int
    /// Its output in the JSON arena: exactly the frame's declared size, followed by `RecordDecoder.padding`
    /// bytes that nothing writes before the record is scanned.
    var at: Int
    var size: Int
    /// Set by the thread that decompressed it: the frame filled `size` bytes exactly.
    var ok: Bool
}

/// The pointers of one batch's decompression job, shared with the helper threads.
private struct InflateJob: @unchecked Sendable {
    // Why @unchecked Sendable: the pointers stay valid from `InflateCrew.begin` until `InflateCrew.end` returns
    // (the decoding thread holds the arrays they point into for that whole time and waits in `end` until no
    // helper is inside the job), and each entry, with its output range, is written by the one thread that
    // claimed its chunk; the claim and the "done" that publishes it are taken under the crew's lock.
    var input: UnsafeRawPointer
    var arena: UnsafeMutableRawPointer
    var entries: UnsafeMutablePointer<InflateEntry>
    var count: Int
}

/// Threads that help one `RecordDecoder` decompress a batch's zstd values while the decoding thread scans the
/// ones already done (`source.decode_threads`): decompression is two thirds of decoding, and scanning, which
/// appends to the batch, stays on one thread in record order. Work is claimed in chunks of a few records: the
/// decoding thread takes them from the front (it needs them in that order), the helpers from the back, so that
/// the threads meet once per batch. The decoding thread waits only for a chunk a helper has in hand where they
/// meet: a helper that gets no core (every core busy) costs the decoding thread nothing but its own work.
///
/// Threading: `begin`, `waitFor`, `end` and `stop` are for the decoding thread only.
final class InflateCrew: @unchecked Sendable {
    // Why @unchecked Sendable: every mutable field is guarded by `condition`; the zstd contexts in `contexts`
    // belong one to each helper thread.

    /// Records per claimed chunk: a few microseconds of work each, so that claims cost little and the
    /// decoding thread rarely waits for the chunk it needs next.
    static let chunk = 4
    /// How often the decoding thread looks again (yielding in between) for a chunk a helper has in hand before it
    /// sleeps until the helper is done.
    static let spinsBeforeWaiting = 200

    private let condition = NSCondition()
    private var job: InflateJob?
    /// Chunks `front..<back` are not claimed yet: the decoding thread claims `front`, helpers claim `back - 1`.
    private var front = 0
    private var back = 0
    private var done: [Bool] = []
    /// Helpers working inside the current job.
    private var busy = 0
    private var stopping = false
    private var exited = 0
    private let helpers: Int
    /// CPU time the helper threads spent on jobs, in nanoseconds.
    private var helperNanoseconds: UInt64 = 0

    /// Starts `helpers` threads. Their closures hold the crew: it lives until `stop` ends them (the decoder's
    /// `deinit` calls it).
    init(helpers: Int) {
        self.helpers = helpers
        for i in 0..<helpers {
            let thread = Thread { [self] in self.helperLoop(ZstdDecompressor()) }
            thread.name = "maidian-inflate-\(i + 1)"
            thread.start()
        }
    }

    /// CPU seconds the helper threads spent decompressing.
    var helperCPUSeconds: Double {
        condition.lock()
        defer { condition.unlock() }
        return Double(helperNanoseconds) / 1e9
    }

    /// Publishes a job: `entries[0..<count]`, reading from `input` and writing into `arena`.
    func begin(input: UnsafeRawPointer, arena: UnsafeMutableRawPointer, entries: UnsafeMutablePointer<InflateEntry>, count: Int) {
        condition.lock()
        job = InflateJob(input: input, arena: arena, entries: entries, count: count)
        front = 0
        back = (count + Self.chunk - 1) / Self.chunk
        done.removeAll(keepingCapacity: true)
        done.append(contentsOf: repeatElement(false, count: back))
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once the chunk of entry `e` was tried (each entry's `ok` says whether it worked): decompresses the
    /// front chunk itself while that chunk is not done and chunks are left; waits only when a helper has it in
    /// hand. Chunks are asked for in order.
    func waitFor(entry e: Int, using zstd: ZstdDecompressor) {
        let c = e / Self.chunk
        condition.lock()
        var spins = 0
        while !done[c] {
            if inflateChunk(fromFront: true, using: zstd) { continue }
            // A helper has it in hand: a chunk takes microseconds, and sleeping on the condition costs a wake-up
            // (tens to hundreds of microseconds in a virtual machine), so look again a few times first.
            if spins < Self.spinsBeforeWaiting {
                spins += 1
                condition.unlock()
                sched_yield()
                condition.lock()
            } else {
                condition.wait()
            }
        }
        condition.unlock()
    }

    /// Ends the job: chunks nobody claimed stay undone (their entries' `ok` stays false), and it returns once no
    /// helper is inside the job any more, so the caller may release what the pointers point into.
    func end() {
        condition.lock()
        front = back
        while busy > 0 { condition.wait() }
        job = nil
        condition.unlock()
    }

    /// Ends the helper threads and waits for them (the decoder's owner calls it when the decoder is done).
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while exited < helpers { condition.wait() }
        condition.unlock()
    }

    private func helperLoop(_ zstd: ZstdDecompressor) {
        condition.lock()
        while true {
            while !stopping && (job == nil || front >= back) { condition.wait() }
            if stopping { break }
            busy += 1
            let cpu0 = Self.threadNanoseconds()
            while inflateChunk(fromFront: false, using: zstd) { condition.broadcast() }
            helperNanoseconds &+= Self.threadNanoseconds() &- cpu0
            busy -= 1
            condition.broadcast()
        }
        exited += 1
        condition.broadcast()
        condition.unlock()
    }

    /// With the lock held: claims the front or the back chunk, decompresses it without the lock and marks it
    /// done. False when no chunk is left to claim.
    private func inflateChunk(fromFront: Bool, using zstd: ZstdDecompressor) -> Bool {
        guard front < back, let job else { return false }
        let k: Int
        if fromFront {
            k = front
            front += 1
        } else {
            back -= 1
            k = back
        }
        condition.unlock()
        Self.inflate(chunk: k, of: job, using: zstd)
        condition.lock()
        done[k] = true
        return true
    }

    /// Decompresses the entries of chunk `k`. A frame that does not fill its declared size exactly (or is not
    /// one frame) leaves `ok` false: the decoding thread then takes the record through the general path, which
    /// tells what is wrong with it.
    private static func inflate(chunk k: Int, of job: InflateJob, using zstd: ZstdDecompressor) {
        let first = k * chunk
        let last = Swift.min(first + chunk, job.count)
        for e in first..<last {
            let entry = job.entries + e
            let input = UnsafeRawBufferPointer(start: job.input + entry.pointee.inputStart, count: entry.pointee.inputEnd - entry.pointee.inputStart)
            let output = UnsafeMutableRawBufferPointer(start: job.arena + entry.pointee.at, count: entry.pointee.size)
            entry.pointee.ok = zstd.decompressFilling(input, into: output)
        }
    }

    private static func threadNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
