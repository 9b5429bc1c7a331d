import Foundation
import Logging
import MaidianEvents
import MaidianKafka
import MaidianPipeline

/// Hands a worker's outputs to librdkafka and serves their delivery reports on a thread of its own, so that
/// the worker thread polls, decodes and runs the stages while the producing (a partitioner call per output)
/// and the delivery reports (a callback per output) happen beside it: on a machine with a core to spare that
/// was a fifth of the worker thread's CPU time (bench/README.md, issue 16). Values are not copied into
/// librdkafka: a job's bytes become a `ProducerPayload` that librdkafka reads until they are delivered.
///
/// The worker registers a batch's records with the `OffsetTracker` first (`withLedger`), then `send`s the
/// batch's serialized outputs: their arrays move to the sender (the worker gets recycled ones back), which
/// produces them in the order they were sent (a partition's outputs keep their order) and counts their
/// delivery reports down in the tracker. `flush` returns once everything sent before it is delivered. Offsets
/// are still stored and committed by the worker, from what the tracker says is delivered: the sender changes
/// where outputs are produced, not what is committed.
///
/// Threading: `send`, `flush`, `withLedger`, `failure`, `stop` are for the worker thread. The tracker and the
/// refused outputs (the ledger) are shared with the sender thread under a lock; the producer itself is used on
/// the sender thread only (besides its thread-safe `wakePoll`, `fatalError`).
final class OutputSender: @unchecked Sendable {
    // Why @unchecked Sendable: the queue of jobs and the results are guarded by `condition`, the ledger by
    // `ledgerLock`; `sent`, `handles` and `delivered` are touched by the sender thread only.

    /// A token for an output that is not produced (it derives from a record re-read to rebuild state).
    static let skip = UInt64.max

    /// One batch of outputs, or a flush request.
    struct Job {
        var bytes: [UInt8] = []
        var messages: [OutputMessage] = []
        /// Per message: the delivery token (`OffsetTracker`), or `skip`.
        var tokens: [UInt64] = []
        /// Topic names as produced, by output topic index.
        var topics: [String] = []
        /// A flush with this timeout instead of outputs.
        var flush: Duration?
        var flushID = 0
        /// A push (`push()`) instead of outputs.
        var push = false
    }

    private let producer: KafkaProducer
    private let logger: Logger
    /// Outputs Kafka refused for good while producing.
    private let dropped: StageCounter
    /// Jobs sent and not yet taken by the sender thread. The worker waits when `maxQueued` outputs jobs wait:
    /// with librdkafka's own queue (256 MiB) that bounds what a slow broker holds in memory.
    private let maxQueued: Int
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var queuedOutputs = 0
    /// Emptied arrays of produced jobs, for the worker's next batches (no growing from nothing per batch).
    private var spare: [Job] = []
    private var nextFlushID = 1
    private var flushedID = 0
    private var flushError: (any Error)?
    private var stopping = false
    private var exited = false
    private var failed: (any Error)?
    /// The sender thread's CPU time when it exited.
    private var threadCPU: Duration = .zero

    private let ledgerLock = NSLock()
    private let tracker: OffsetTracker
    private let refused: RefusedOutputs
    /// The dead-letter topic's name as produced, once the pipeline told it (refused outputs are dead-lettered there).
    private var deadLetterTopic: String?

    /// Sender thread only: topic handles by name, the tokens of successful delivery reports not yet counted.
    private var handles: [String: ProducerTopic] = [:]
    private var delivered: [UInt64] = []
    /// Sender thread only: byte arrays of released payloads, for jobs going back to the worker (outputs are
    /// sent from a job's bytes without a copy, so the bytes stay with librdkafka until they are delivered).
    private var releasedBytes: [[UInt8]] = []

    /// - Parameter dropped: counts outputs not produced at all (refused for good and not dead-lettered).
    init(producer: KafkaProducer, dropped: StageCounter, maxQueued: Int = 4, logger: Logger) {
        self.producer = producer
        self.logger = logger
        self.dropped = dropped
        self.maxQueued = maxQueued
        self.tracker = OffsetTracker()
        self.refused = RefusedOutputs(dropped: dropped, logger: logger)
        delivered.reserveCapacity(1 << 16)
        producer.onDelivery = { [unowned self] token, error in
            guard let error else {
                delivered.append(token)
                return
            }
            ledgerLock.withLock {
                if error.isPermanentForMessage {
                    // Kafka will never take this message: stopping would only refuse it again on every restart.
                    refused.refusedForGood(error, token: token)
                    tracker.delivered(token: token, error: nil)
                } else {
                    tracker.delivered(token: token, error: "\(error)")
                }
            }
        }
        producer.onPayloadReleased = { [unowned self] payload in
            // A few arrays kept for reuse: the worker's batches of outputs have similar sizes.
            if releasedBytes.count < 2 * maxQueued + 2 { releasedBytes.append(payload.bytes) }
        }
        producer.onRefused = { [unowned self] token, error, topic, value in
            ledgerLock.withLock {
                // Kept for a `too_large` dead letter: its record waits for that one too.
                if refused.keep(token: token, error: error, topic: topic, value: value, deadLetterTopic: deadLetterTopic) {
                    tracker.addOutputs(token: token, 1)
                }
            }
        }
        let thread = Thread { [self] in loop() }
        thread.name = "maidian-sender"
        thread.start()
    }

    /// Runs `body` with the tracker and the refused outputs, which the sender thread updates meanwhile.
    func withLedger<R>(_ body: (OffsetTracker, RefusedOutputs) throws -> R) rethrows -> R {
        ledgerLock.lock()
        defer { ledgerLock.unlock() }
        return try body(tracker, refused)
    }

    /// Where outputs refused for their size are dead-lettered (the topic's name as produced).
    func setDeadLetterTopic(_ name: String?) {
        ledgerLock.withLock { deadLetterTopic = name }
    }

    /// The error that stopped the sender producing (a produce call refused an output, librdkafka raised a fatal
    /// error, a topic handle could not be made); outputs sent after it are not produced.
    var failure: (any Error)? {
        condition.lock()
        defer { condition.unlock() }
        return failed
    }

    /// Hands the outputs over: `bytes`, `messages` and `tokens` (one per message) come back empty, with the
    /// capacity of an earlier batch's. Waits while `maxQueued` batches wait to be produced.
    func send(bytes: inout [UInt8], messages: inout [OutputMessage], tokens: inout [UInt64], topics: [String]) {
        precondition(tokens.count == messages.count, "one token per output")
        if messages.isEmpty { return }
        condition.lock()
        while queuedOutputs >= maxQueued && failed == nil && !exited { condition.wait() }
        var job = spare.popLast() ?? Job()
        swap(&job.bytes, &bytes)
        swap(&job.messages, &messages)
        swap(&job.tokens, &tokens)
        job.topics = topics
        jobs.append(job)
        queuedOutputs += 1
        condition.unlock()
        producer.wakePoll()
    }

    /// Has everything sent so far sent to the brokers now, without waiting for `linger.ms`, and returns at once:
    /// the sender thread flushes while the worker goes on. For outputs that the worker itself waits to read
    /// back (the final partials of a bounded run, which its own merger reads from the internal topic):
    /// lingering would only add `linger.ms` to the run's end. The flush's outcome is not reported; the next
    /// `flush` reports any delivery failure, and offsets still move only with delivery reports.
    func push() {
        condition.lock()
        jobs.append(Job(push: true))
        condition.unlock()
        producer.wakePoll()
    }

    /// Waits until everything sent so far is produced and delivered (librdkafka's flush, which does not wait
    /// for `linger.ms`), or `timeout` passes. Throws the sender's failure, or the flush's.
    func flush(timeout: Duration) throws {
        condition.lock()
        if let failed {
            condition.unlock()
            throw failed
        }
        let id = nextFlushID
        nextFlushID += 1
        jobs.append(Job(flush: timeout, flushID: id))
        condition.unlock()
        producer.wakePoll()
        condition.lock()
        while flushedID < id && !exited { condition.wait() }
        let error = flushedID >= id ? flushError : RuntimeError(.delivery, "the sender stopped before the flush")
        condition.unlock()
        if let error { throw error }
    }

    /// Stops the sender thread once it produced what was sent (`discard`: drops what it did not take yet) and
    /// waits for it. Returns its CPU time.
    @discardableResult
    func stop(discard: Bool = false) -> Duration {
        condition.lock()
        stopping = true
        if discard {
            queuedOutputs -= jobs.filter { $0.flush == nil && !$0.push }.count
            jobs.removeAll()
        }
        condition.unlock()
        producer.wakePoll()
        condition.lock()
        while !exited { condition.wait() }
        let cpu = threadCPU
        condition.unlock()
        return cpu
    }

    // MARK: The sender thread

    private func loop() {
        while true {
            condition.lock()
            if jobs.isEmpty {
                let stop = stopping
                condition.unlock()
                if stop { break }
                // Delivery reports until `send`/`flush`/`stop` wake the poll; the timeout only bounds a missed wake.
                producer.poll(timeout: .milliseconds(100))
                countDelivered()
                continue
            }
            var job = jobs.removeFirst()
            let failedBefore = failed != nil
            condition.unlock()
            if job.push {
                // Bounded: outputs sent meanwhile wait behind it (a slow broker makes the worker's flush wait anyway).
                if !failedBefore { try? producer.flush(timeout: .seconds(1)) }
                countDelivered()
                continue
            }
            if let timeout = job.flush {
                var flushFailed: (any Error)?
                if !failedBefore {
                    do { try producer.flush(timeout: timeout) } catch { flushFailed = error }
                    countDelivered()
                }
                condition.lock()
                flushError = failed ?? flushFailed
                flushedID = job.flushID
                condition.broadcast()
                condition.unlock()
                continue
            }
            if !failedBefore { produce(&job) }
            // Serves the reports already in, so that they do not wait for the next idle poll.
            producer.poll(timeout: .zero)
            countDelivered()
            // The job's own bytes went to librdkafka: give the worker an array it let go of.
            if job.bytes.isEmpty, let reuse = releasedBytes.popLast() { job.bytes = reuse }
            job.bytes.removeAll(keepingCapacity: true)
            job.messages.removeAll(keepingCapacity: true)
            job.tokens.removeAll(keepingCapacity: true)
            condition.lock()
            queuedOutputs -= 1
            spare.append(job)
            condition.broadcast()
            condition.unlock()
        }
        condition.lock()
        threadCPU = LoopProfile.threadCPU()
        exited = true
        condition.broadcast()
        condition.unlock()
    }

    private func recordFailure(_ error: any Error) {
        condition.lock()
        if failed == nil { failed = error }
        condition.unlock()
    }

    /// Produces a job's outputs from its bytes, which move into a payload that librdkafka reads the values from
    /// until they are delivered (`job.bytes` comes back empty); the first produce error other than a permanent
    /// refusal of one output stops it.
    private func produce(_ job: inout Job) {
        var topicHandles: [ProducerTopic] = []
        do {
            topicHandles.reserveCapacity(job.topics.count)
            for name in job.topics {
                if let h = handles[name] {
                    topicHandles.append(h)
                } else {
                    let h = try producer.topic(name)
                    handles[name] = h
                    topicHandles.append(h)
                }
            }
        } catch {
            recordFailure(error)
            return
        }
        let payload = ProducerPayload(bytes: job.bytes)
        job.bytes = []  // the payload's array is now the only reference: it is never copied on a write
        defer { producer.release(payload) }
        payload.bytes.withUnsafeBytes { bytes in
            for (i, m) in job.messages.enumerated() {
                let token = job.tokens[i]
                if token == OutputSender.skip { continue }
                let key = m.key.isPresent ? UnsafeRawBufferPointer(rebasing: bytes[Int(m.key.start)..<Int(m.key.end)]) : UnsafeRawBufferPointer(start: nil, count: 0)
                do {
                    try producer.produce(topicHandles[Int(m.topic)], partition: m.partition >= 0 ? m.partition : nil, key: key,
                                         in: payload, range: Int(m.value.start)..<Int(m.value.end), token: token)
                } catch let e as KafkaError {
                    if e.isPermanentForMessage {
                        ledgerLock.withLock {
                            refused.refusedForGood(e)
                            tracker.delivered(token: token, error: nil)
                        }
                        continue
                    }
                    // librdkafka refuses at once what it knows cannot be delivered (a topic in a permanent error).
                    if e.code == .fatal {
                        recordFailure(RuntimeError(.fatal, "librdkafka raised a fatal error; stopping without committing", underlying: e))
                    } else {
                        recordFailure(RuntimeError(.delivery, "an output could not be delivered (refused when produced); stopping without committing past it", underlying: e))
                    }
                    return
                } catch {
                    recordFailure(error)
                    return
                }
            }
        }
    }

    /// Counts the successful delivery reports served since the last call down in the tracker, under one lock.
    private func countDelivered() {
        if delivered.isEmpty { return }
        ledgerLock.withLock {
            for token in delivered { tracker.delivered(token: token, error: nil) }
        }
        delivered.removeAll(keepingCapacity: true)
    }
}
