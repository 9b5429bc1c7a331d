import CZstd

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The only Swift file that talks to libzstd. Everything else uses these three classes.

/// A zstd failure: corrupt data, input that ends inside a frame, or output past the caller's limit.
public struct ZstdError: Error, CustomStringConvertible, Equatable {
    /// What went wrong.
    public enum Code: Sendable, Equatable {
        /// The input is not valid zstd (libzstd's error text is in `message`).
        case corrupt
        /// The input ends inside a frame.
        case truncated
        /// Decompressing would produce more than the allowed number of bytes.
        case tooLarge
    }

    /// What went wrong.
    public let code: Code
    /// Human-readable detail (for `.corrupt`, libzstd's `ZSTD_getErrorName` text).
    public let message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// A `.corrupt` error with the given text.
    public static func corrupt(_ message: String) -> ZstdError { ZstdError(code: .corrupt, message: message) }
    /// The input ended inside a frame.
    public static let truncated = ZstdError(code: .truncated, message: "input ends inside a zstd frame")
    /// The output passed the limit.
    public static func tooLarge(limit: Int) -> ZstdError {
        ZstdError(code: .tooLarge, message: "decompressed data passes the limit of \(limit) bytes")
    }

    /// The error as one line of text.
    public var description: String {
        switch code {
        case .corrupt: return "zstd: corrupt data: \(message)"
        case .truncated: return "zstd: truncated: \(message)"
        case .tooLarge: return "zstd: too large: \(message)"
        }
    }
}

@inline(__always)
private func zstdErrorText(_ code: Int) -> String {
    String(cString: ZSTD_getErrorName(code))
}


/// A reusable zstd decompressor: one `ZSTD_DCtx`, reset (not re-created) for every call.
///
/// Not thread-safe: use one per thread. Decompression is streaming and capped: the frame header's
/// declared content size is only a sizing hint, never trusted, and the call fails with `.tooLarge` as
/// soon as the output would pass the limit.
public final class ZstdDecompressor {
    private var ctx: OpaquePointer
    /// Whether the streaming decoder has run on this context since it was created, so that its stream buffers may
    /// be sized by an earlier frame.
    private var streamedBefore = false
    /// How many failures were decided again on a new context (for tests).
    private(set) var failuresDecidedAgain = 0

    /// Creates a decompressor with its own context.
    public init() {
        ctx = ZstdDecompressor.newContext()
    }

    deinit {
        ZSTD_freeDCtx(ctx)
    }

    private static func newContext() -> OpaquePointer {
        guard let c = ZSTD_createDCtx() else { fatalError("ZSTD_createDCtx failed (out of memory)") }
        return c
    }

    /// Decompresses one or more concatenated zstd frames (skippable frames are skipped) and
    /// **appends** the result to `output`, keeping its existing bytes.
    ///
    /// - Parameters:
    ///   - input: the compressed bytes; an empty input appends nothing.
    ///   - output: the arena to append to. On error it is left with its old count (its capacity may
    ///     have grown).
    ///   - limit: the most bytes this call may append.
    /// - Returns: the number of bytes appended.
    /// - Throws: `.corrupt` (libzstd's error text), `.truncated` (input ends mid-frame),
    ///   `.tooLarge` (more than `limit` bytes would be produced).
    ///
    /// A failure is the same whatever this decompressor decoded before: libzstd keeps its stream buffers between
    /// calls, so a failure they could have changed is decided again on a new context (`reachesFrameDeclaringItsSize`).
    @discardableResult
    public func decompress(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) throws(ZstdError) -> Int {
        let mayRemember = streamedBefore
        streamedBefore = true
        do {
            return try decompressStreaming(input, into: &output, limit: limit)
        } catch {
            guard mayRemember, ZstdDecompressor.reachesFrameDeclaringItsSize(input) else { throw error }
            // libzstd keeps its stream buffers across resets, sized by the largest frame that needed them. A frame that
            // declares its size and produces more then meets a different buffer: with one sized by an earlier frame
            // the decoder stops early with "Destination buffer is too small", with a fresh one it runs on until the
            // limit. A refused value's dead letter (its reason and detail) must depend on the value alone, not on what
            // the worker decoded before, so such a failure is decided once more on a new context, which is kept. Only
            // refused values with such a frame pay for the second pass.
            failuresDecidedAgain += 1
            ZSTD_freeDCtx(ctx)
            ctx = ZstdDecompressor.newContext()
            return try decompressStreaming(input, into: &output, limit: limit)
        }
    }

    /// Whether the streaming decoder, going through `input`'s frames, reaches one that declares its content size.
    ///
    /// Only such a frame's outcome can depend on a kept stream buffer. Without a declared size the decoder always
    /// reuses its buffer from the start once a block no longer fits, whatever the buffer's size, so what it writes and
    /// where it fails are the same with any buffer. The walk stops where decoding would: at bytes that are not a frame
    /// header, or inside a frame.
    static func reachesFrameDeclaringItsSize(_ input: UnsafeRawBufferPointer) -> Bool {
        guard let base = input.baseAddress else { return false }
        var at = 0
        while at < input.count {
            let left = input.count - at
            let size = ZSTD_getFrameContentSize(base + at, left)
            if size == UInt64.max - 1 { return false }  // ZSTD_CONTENTSIZE_ERROR: not a frame (or a cut header)
            // A skippable frame reports 0 and allocates nothing.
            if size != UInt64.max && ZSTD_isSkippableFrame(base + at, left) == 0 { return true }  // not ZSTD_CONTENTSIZE_UNKNOWN
            let n = ZSTD_findFrameCompressedSize(base + at, left)
            if ZSTD_isError(n) != 0 || n == 0 { return false }  // decoding ends inside this frame
            at += n
        }
        return false
    }

    private func decompressStreaming(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) throws(ZstdError) -> Int {
        ZSTD_DCtx_reset(ctx, ZSTD_reset_session_only)
        guard input.count > 0, let inBase = input.baseAddress else { return 0 }
        let limit = Swift.min(Swift.max(0, limit), Int.max - 1)
        let start = output.count

        // First region: the declared content size when it looks plausible, else a multiple of the
        // input. Grows by doubling. One byte past the limit is allowed in so that "exactly the limit"
        // and "more than the limit" can be told apart without a probe.
        var hint = Swift.max(input.count * 8, 4096)
        let declared = ZSTD_getFrameContentSize(inBase, input.count)
        if declared < UInt64.max - 1 {  // neither ZSTD_CONTENTSIZE_UNKNOWN nor ZSTD_CONTENTSIZE_ERROR
            // Declared size plus a little, so that the final "frame done" call has room; capped at a
            // ratio no honest JSON payload reaches, so a lying header cannot make us zero-fill much.
            hint = Int(clamping: Swift.min(declared &+ 64, UInt64(Swift.max(input.count, 64)) &* 64))
        }
        var inBuf = ZSTD_inBuffer(src: inBase, size: input.count, pos: 0)
        // One output region, zero-filled once and grown geometrically, that every decoder call writes on
        // into: a value of many tiny frames (each call ends at a frame's end) must not zero-fill or reallocate
        // a large region per frame, which made decoding quadratic in the frame count (issue 13, class 4).
        var region = Swift.max(Swift.min(hint, limit + 1), 1)
        appendZeros(&output, region)
        var produced = 0
        while true {
            if produced == region {
                // Full: grow by doubling (at most 64 MiB at a time), never past one byte over the limit.
                let more = Swift.min(Swift.max(region, 4096), 64 << 20, limit + 1 - region)
                appendZeros(&output, more)
                region += more
            }
            let inBefore = inBuf.pos
            let (wrote, ret): (Int, Int) = output.withUnsafeMutableBytes { all in
                var outBuf = ZSTD_outBuffer(dst: all.baseAddress! + start + produced, size: region - produced, pos: 0)
                let r = ZSTD_decompressStream(ctx, &outBuf, &inBuf)
                return (outBuf.pos, r)
            }
            produced += wrote
            if ZSTD_isError(ret) != 0 {
                output.removeSubrange(start...)
                throw ZstdError.corrupt(zstdErrorText(ret))
            }
            if produced > limit {
                output.removeSubrange(start...)
                throw ZstdError.tooLarge(limit: limit)
            }
            if ret == 0 {
                if inBuf.pos == inBuf.size { break }
                // Another frame follows; the stream decoder starts it on the next call.
                continue
            }
            let outputFull = produced == region
            if inBuf.pos == inBuf.size && !outputFull {
                // All input consumed, output not full, frame not finished: the decoder needs more input.
                output.removeSubrange(start...)
                throw ZstdError.truncated
            }
            if wrote == 0 && inBuf.pos == inBefore {
                // No progress at all (cannot happen with a conforming libzstd): never spin.
                output.removeSubrange(start...)
                throw ZstdError.truncated
            }
        }
        output.removeLast(region - produced)
        return produced
    }

    /// Decompresses `input` (one or more frames) into a new array, with no size limit beyond `limit`.
    public func decompress(_ input: [UInt8], limit: Int = Int.max - 1) throws(ZstdError) -> [UInt8] {
        var out: [UInt8] = []
        var failure: ZstdError? = nil
        input.withUnsafeBytes { raw in
            do throws(ZstdError) {
                _ = try decompress(raw, into: &out, limit: limit)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return out
    }

    /// Whether `bytes` starts with the zstd frame magic `28 B5 2F FD`.
    public static func hasMagic(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 4 && bytes[0] == 0x28 && bytes[1] == 0xB5 && bytes[2] == 0x2F && bytes[3] == 0xFD
    }

    /// Reads and decompresses a whole zstd file (for example a `.ndjson.zst` recording) into memory.
    ///
    /// Streaming: the compressed file is read in chunks, so peak memory is the decompressed size plus
    /// one chunk. Throws `ZstdFileError` for I/O problems and `ZstdError` for bad data.
    public static func decompressFile(path: String, limit: Int = Int.max - 1) throws -> [UInt8] {
        let reader = try ZstdFileReader(path: path)
        var out: [UInt8] = []
        while try reader.read(into: &out, maxBytes: 8 << 20) > 0 {
            if out.count > limit { throw ZstdError.tooLarge(limit: limit) }
        }
        return out
    }
}

/// An I/O failure while reading or writing a file through the zstd helpers.
public struct ZstdFileError: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// What failed, with the system's error text.
    public let message: String

    /// Creates an error.
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// The error as one line of text.
    public var description: String { "\(path): \(message)" }
}

@inline(__always)
private func systemErrorText() -> String {
    String(cString: strerror(errno))
}

/// Streams the decompressed bytes of a zstd file in chunks (for line-by-line reading of large
/// `.ndjson.zst` recordings without holding the whole file). Concatenated frames are read as one stream.
///
/// Not thread-safe.
public final class ZstdFileReader {
    private let fd: Int32
    private let path: String
    let ctx: OpaquePointer
    private var inBuffer: [UInt8]
    private var inPos = 0
    private var inEnd = 0
    private var eof = false
    /// Whether the last decoder call ended a frame (or nothing was read yet).
    private var atFrameBoundary = true
    private var finished = false

    /// Opens the file for reading.
    public init(path: String) throws {
        let f = open(path, O_RDONLY)
        if f < 0 { throw ZstdFileError(path: path, message: "cannot open: \(systemErrorText())") }
        guard let c = ZSTD_createDCtx() else {
            close(f)
            fatalError("ZSTD_createDCtx failed (out of memory)")
        }
        fd = f
        ctx = c
        self.path = path
        inBuffer = [UInt8](repeating: 0, count: Swift.max(ZSTD_DStreamInSize(), 1 << 20))
    }

    deinit {
        ZSTD_freeDCtx(ctx)
        close(fd)
    }

    private func refill() throws {
        let n = inBuffer.withUnsafeMutableBytes { buf -> Int in
            var r: Int
            repeat { r = sysRead(fd, buf.baseAddress!, buf.count) } while r < 0 && errno == EINTR
            return r
        }
        if n < 0 { throw ZstdFileError(path: path, message: "read failed: \(systemErrorText())") }
        inPos = 0
        inEnd = n
        if n == 0 { eof = true }
    }

    /// Appends up to about `maxBytes` decompressed bytes to `output`.
    ///
    /// - Returns: the number of bytes appended; 0 means the end of the file.
    /// - Throws: `ZstdFileError` on I/O errors, `ZstdError` on corrupt or truncated data.
    public func read(into output: inout [UInt8], maxBytes: Int = 4 << 20) throws -> Int {
        if finished { return 0 }
        let want = Swift.max(maxBytes, 1)
        var produced = 0
        while produced < want {
            if inPos == inEnd && !eof {
                try refill()
            }
            if inPos == inEnd && eof && atFrameBoundary {
                // A finished frame is fully flushed (the decoder returned 0): nothing is left.
                finished = true
                break
            }
            // At most 1 MiB per decoder call: less zero-filling of space the decoder may not use.
            let room = Swift.min(want - produced, 1 << 20)
            var decodeError: ZstdError? = nil
            var ret = 0
            let wrote: Int = withAppendedRegion(&output, room) { region in
                inBuffer.withUnsafeBytes { inb in
                    var inBuf = ZSTD_inBuffer(src: inb.baseAddress, size: inEnd, pos: inPos)
                    var outBuf = ZSTD_outBuffer(dst: region.baseAddress, size: region.count, pos: 0)
                    ret = ZSTD_decompressStream(ctx, &outBuf, &inBuf)
                    inPos = inBuf.pos
                    if ZSTD_isError(ret) != 0 { decodeError = ZstdError.corrupt(zstdErrorText(ret)) }
                    return (outBuf.pos, outBuf.pos)
                }
            }
            if let decodeError { throw decodeError }
            produced += wrote
            atFrameBoundary = ret == 0
            if wrote == 0 && inPos == inEnd && eof && !atFrameBoundary {
                throw ZstdError.truncated
            }
        }
        return produced
    }
}

@inline(__always)
private func sysRead(_ fd: Int32, _ buf: UnsafeMutableRawPointer, _ n: Int) -> Int {
    read(fd, buf, n)
}

/// A reusable zstd compressor: one `ZSTD_CCtx` for one-shot frames (`compress`), and a streaming mode
/// (`streamBegin`/`streamWrite`/`streamEnd`) for large outputs such as `.ndjson.zst` recordings.
///
/// Frames carry their content size (one-shot mode) and no checksum, like the SDK uploads.
/// Not thread-safe: use one per thread.
public final class ZstdCompressor {
    let ctx: OpaquePointer

    /// Creates a compressor with its own context.
    public init() {
        guard let c = ZSTD_createCCtx() else { fatalError("ZSTD_createCCtx failed (out of memory)") }
        ctx = c
    }

    deinit {
        ZSTD_freeCCtx(ctx)
    }

    /// Compresses `bytes` into one frame and appends it to `output`. Returns the compressed size.
    @discardableResult
    public func compress(_ bytes: UnsafeRawBufferPointer, level: Int = 3, appendingTo output: inout [UInt8]) -> Int {
        ZSTD_CCtx_reset(ctx, ZSTD_reset_session_and_parameters)
        ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, Int32(clamping: level))
        let bound = ZSTD_compressBound(bytes.count)
        return withAppendedRegion(&output, bound) { region in
            let r = ZSTD_compress2(ctx, region.baseAddress, region.count, bytes.baseAddress, bytes.count)
            // Cannot fail with a destination of ZSTD_compressBound bytes.
            if ZSTD_isError(r) != 0 { fatalError("zstd compression failed: \(zstdErrorText(r))") }
            return (r, r)
        }
    }

    /// Compresses `bytes` into one new frame.
    public func compress(_ bytes: UnsafeRawBufferPointer, level: Int = 3) -> [UInt8] {
        var out: [UInt8] = []
        compress(bytes, level: level, appendingTo: &out)
        return out
    }

    /// Compresses `bytes` into one new frame.
    public func compress(_ bytes: [UInt8], level: Int = 3) -> [UInt8] {
        bytes.withUnsafeBytes { compress($0, level: level) }
    }

    /// Starts a streamed frame (ends any unfinished one). Content size is not recorded.
    public func streamBegin(level: Int = 3) {
        ZSTD_CCtx_reset(ctx, ZSTD_reset_session_and_parameters)
        ZSTD_CCtx_setParameter(ctx, ZSTD_c_compressionLevel, Int32(clamping: level))
    }

    /// Feeds bytes into the streamed frame, appending whatever compressed output is ready to `output`.
    public func streamWrite(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8]) {
        guard bytes.count > 0 else { return }
        var inBuf = ZSTD_inBuffer(src: bytes.baseAddress, size: bytes.count, pos: 0)
        let step = ZSTD_CStreamOutSize()
        while inBuf.pos < inBuf.size {
            drive(&inBuf, ZSTD_e_continue, step, &output)
        }
    }

    /// Ends the streamed frame, appending the remaining compressed bytes to `output`.
    public func streamEnd(into output: inout [UInt8]) {
        var inBuf = ZSTD_inBuffer(src: nil, size: 0, pos: 0)
        let step = ZSTD_CStreamOutSize()
        while drive(&inBuf, ZSTD_e_end, step, &output) != 0 {}
    }

    @discardableResult
    private func drive(_ inBuf: inout ZSTD_inBuffer, _ op: ZSTD_EndDirective, _ step: Int, _ output: inout [UInt8]) -> Int {
        withAppendedRegion(&output, step) { region in
            var outBuf = ZSTD_outBuffer(dst: region.baseAddress, size: region.count, pos: 0)
            let r = ZSTD_compressStream2(ctx, &outBuf, &inBuf, op)
            if ZSTD_isError(r) != 0 { fatalError("zstd streaming compression failed: \(zstdErrorText(r))") }
            return (outBuf.pos, r)
        }
    }
}

extension ZstdDecompressor {
    /// The total decompressed size that the frame headers of `input` declare (all frames), or nil when a
    /// frame does not declare it or the input is not zstd. Untrusted: decompression checks it.
    public func declaredSize(_ input: UnsafeRawBufferPointer) -> Int? {
        guard let base = input.baseAddress, input.count > 0 else { return nil }
        let n = ZSTD_findDecompressedSize(base, input.count)
        if n >= UInt64.max - 1 { return nil }  // ZSTD_CONTENTSIZE_UNKNOWN or _ERROR
        return Int(clamping: n)
    }

    /// The content size the first frame of `input` declares, or nil (none declared, or not a zstd frame).
    /// Untrusted: decompression checks it.
    public func firstFrameContentSize(_ input: UnsafeRawBufferPointer) -> Int? {
        guard let base = input.baseAddress, input.count > 0 else { return nil }
        let n = ZSTD_getFrameContentSize(base, input.count)
        if n >= UInt64.max - 1 { return nil }  // ZSTD_CONTENTSIZE_UNKNOWN or _ERROR
        return Int(clamping: n)
    }

    /// Decompresses all frames of `input` into `output` in one call; true when that worked and produced exactly
    /// `output.count` bytes. No error detail: on false, callers take the general path, which explains.
    public func decompressFilling(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard let src = input.baseAddress, let dst = output.baseAddress else { return false }
        let r = ZSTD_decompressDCtx(ctx, dst, output.count, src, input.count)
        return ZSTD_isError(r) == 0 && r == output.count
    }

    /// Decompresses all frames of `input` straight into `output`, whose size must be the declared size:
    /// one call, no intermediate window copy. A header that lies about the size fails as corrupt.
    public func decompressExactly(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(ZstdError) -> Int {
        guard let src = input.baseAddress else { return 0 }
        let r = ZSTD_decompressDCtx(ctx, output.baseAddress, output.count, src, input.count)
        if ZSTD_isError(r) != 0 { throw ZstdError.corrupt(String(cString: ZSTD_getErrorName(r))) }
        return r
    }
}
