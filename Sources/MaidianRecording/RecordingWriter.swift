import MaidianEvents

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a recording file record by record (plain NDJSON, or one streamed zstd frame for
/// `.ndjson.zst`), buffering about 1 MiB at a time. Call `close()` at the end to see write errors:
/// until then the file is incomplete (deinit closes it too, ignoring errors).
///
/// Not thread-safe.
public final class RecordingWriter {
    /// The file being written.
    public let path: String
    /// Whether the output is zstd-compressed.
    public let compressed: Bool
    /// Records appended so far.
    public private(set) var recordCount = 0
    /// Uncompressed NDJSON bytes appended so far.
    public private(set) var textBytes = 0
    /// Bytes written to the file so far (all of them once closed).
    public private(set) var fileBytes = 0

    private var fd: Int32
    private var pending: [UInt8] = []
    private var compressedOut: [UInt8] = []
    private let compressor: ZstdCompressor?
    private static let flushThreshold = 1 << 20

    /// Creates (or truncates) the file. `compress` nil means: compress when the path ends in `.zst`.
    public init(path: String, compress: Bool? = nil, level: Int = 3) throws {
        self.path = path
        let c = compress ?? path.hasSuffix(".zst")
        compressed = c
        let f = sysOpen(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if f < 0 {
            throw RecordingError(code: .io, message: "\(path): cannot create: \(String(cString: strerror(errno)))")
        }
        fd = f
        if c {
            let z = ZstdCompressor()
            z.streamBegin(level: level)
            compressor = z
        } else {
            compressor = nil
        }
        pending.reserveCapacity(RecordingWriter.flushThreshold + (64 << 10))
    }

    deinit {
        // Best effort for a writer that was never closed; errors can only be seen through close().
        if fd >= 0 { try? close() }
    }

    /// Appends one record as a line.
    public func append(_ record: RecordingRecord) throws {
        guard fd >= 0 else { throw RecordingError(code: .io, message: "\(path): writer is closed") }
        let before = pending.count
        Recording.appendLine(record, to: &pending)
        textBytes += pending.count - before
        recordCount += 1
        if pending.count >= RecordingWriter.flushThreshold { try flushPending() }
    }

    private func flushPending() throws {
        guard !pending.isEmpty else { return }
        if let compressor {
            pending.withUnsafeBytes { compressor.streamWrite($0, into: &compressedOut) }
            pending.removeAll(keepingCapacity: true)
            try writeAll(&compressedOut)
        } else {
            try writeAll(&pending)
        }
    }

    private func writeAll(_ buf: inout [UInt8]) throws {
        var off = 0
        let n = buf.count
        var failure: Int32 = 0
        buf.withUnsafeBytes { raw in
            while off < n {
                let r = sysWrite(fd, raw.baseAddress! + off, n - off)
                if r < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                off += r
            }
        }
        if failure != 0 {
            throw RecordingError(code: .io, message: "\(path): write failed: \(String(cString: strerror(failure)))")
        }
        fileBytes += n
        buf.removeAll(keepingCapacity: true)
    }

    /// Writes everything buffered, ends the zstd frame and closes the file. Closing twice is harmless.
    public func close() throws {
        guard fd >= 0 else { return }
        defer {
            sysClose(fd)
            fd = -1
        }
        try flushPending()
        if let compressor {
            compressor.streamEnd(into: &compressedOut)
            try writeAll(&compressedOut)
        }
    }
}

@inline(__always)
func sysClose(_ fd: Int32) {
    _ = close(fd)
}
