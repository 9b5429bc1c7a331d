import CMaxMindDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where an address is: names in one locale (with fallback to English), each nil when the database has none.
public struct GeoLocation: Hashable, Sendable {
    /// Country name (`country/names`).
    public var country: String?
    /// First subdivision: province, state (`subdivisions/0/names`).
    public var province: String?
    /// City name (`city/names`).
    public var city: String?

    /// Creates a location.
    public init(country: String? = nil, province: String? = nil, city: String? = nil) {
        self.country = country
        self.province = province
        self.city = city
    }
}

/// What a database file says about itself.
public struct GeoMetadata: Sendable {
    /// For example `GeoLite2-City`, `GeoIP2-City`.
    public var databaseType: String
    /// Locales that have names, for example `["en", "zh-CN"]`.
    public var languages: [String]
    /// Build time, seconds since the epoch.
    public var buildEpoch: UInt64
    /// 4 or 6.
    public var ipVersion: Int
    /// Nodes of the search tree.
    public var nodeCount: Int
}

/// Identifies one version of a file: device, inode, size, modification and change times. A file replaced
/// (renamed over, rewritten in place, touched) gets another stamp.
public struct GeoFileStamp: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var mtime: (Int64, Int64)
    var ctime: (Int64, Int64)

    /// The current stamp of the file at `path`; nil when it cannot be `stat`ed (missing).
    public init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }

    init(_ st: stat) {
        device = UInt64(truncatingIfNeeded: st.st_dev)
        inode = UInt64(truncatingIfNeeded: st.st_ino)
        size = Int64(st.st_size)
        #if canImport(Darwin)
        mtime = (Int64(st.st_mtimespec.tv_sec), Int64(st.st_mtimespec.tv_nsec))
        ctime = (Int64(st.st_ctimespec.tv_sec), Int64(st.st_ctimespec.tv_nsec))
        #else
        mtime = (Int64(st.st_mtim.tv_sec), Int64(st.st_mtim.tv_nsec))
        ctime = (Int64(st.st_ctim.tv_sec), Int64(st.st_ctim.tv_nsec))
        #endif
    }

    /// Same file version.
    public static func == (a: GeoFileStamp, b: GeoFileStamp) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size && a.mtime == b.mtime && a.ctime == b.ctime
    }

    /// Hashes every field.
    public func hash(into h: inout Hasher) {
        h.combine(device); h.combine(inode); h.combine(size)
        h.combine(mtime.0); h.combine(mtime.1); h.combine(ctime.0); h.combine(ctime.1)
    }
}

/// An open MaxMind-format city database (GeoLite2-City, GeoIP2-City, DB-IP City in MMDB format, ...).
///
/// The file is read once into a private in-memory copy (Linux), so a file rewritten in place under a
/// running worker never changes or truncates what this object reads; to pick up a new version, open the
/// file again (see `GeoFileStamp`). Lookups do not allocate except for the names they return.
///
/// Not thread-safe to share without synchronization: use one instance per thread (lookups only read, but
/// the object makes no promise beyond that).
public final class GeoDatabase {
    /// The path it was opened from.
    public let path: String
    /// The database's metadata.
    public let metadata: GeoMetadata
    /// The stamp of the file as it was read.
    public let stamp: GeoFileStamp
    /// Whether the database was copied to private memory (else the file itself is mapped, and must only be
    /// replaced by renaming a new file over it).
    public let isPrivateCopy: Bool

    /// Heap-allocated: lookup results point back to it, so it must never move.
    private let mmdb: UnsafeMutablePointer<MMDB_s>

    /// Opens and checks the database at `path`.
    ///
    /// - Throws: ``GeoError``: `.fileNotFound`, `.unreadable`, `.invalidDatabase` (not a MaxMind DB, corrupt,
    ///   truncated), `.notCityDatabase` (for example a Country or ASN database), `.fileChanging` (the file
    ///   changed while it was read).
    public init(path: String) throws(GeoError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let e = errno
            throw GeoError(
                code: e == ENOENT ? .fileNotFound : .unreadable,
                message: e == ENOENT ? "geo database '\(path)' does not exist" : "cannot open geo database '\(path)'",
                path: path, underlying: GeoDatabase.errnoError(e))
        }
        defer { close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0 else {
            throw GeoError(code: .unreadable, message: "cannot stat geo database '\(path)'", path: path, underlying: GeoDatabase.errnoError(errno))
        }
        if before.st_mode & S_IFMT == S_IFDIR {
            throw GeoError(code: .unreadable, message: "geo database '\(path)' is a directory, not a .mmdb file", path: path)
        }
        let stamp = GeoFileStamp(before)
        let db = UnsafeMutablePointer<MMDB_s>.allocate(capacity: 1)
        db.initialize(to: MMDB_s())
        var status: Int32 = MMDB_FILE_OPEN_ERROR
        var privateCopy = false
        do {
            if let copy = try GeoDatabase.privateCopy(of: fd, path: path, stamp: stamp) {
                status = MMDB_open("/proc/self/fd/\(copy)", UInt32(MMDB_MODE_MMAP), db)
                close(copy)
                privateCopy = status == MMDB_SUCCESS
            }
        } catch {
            db.deallocate()
            throw error
        }
        if status == MMDB_FILE_OPEN_ERROR {
            // No memfd or no /proc: map the file itself.
            status = MMDB_open(path, UInt32(MMDB_MODE_MMAP), db)
        }
        guard status == MMDB_SUCCESS else {
            db.deallocate()
            let cause = GeoError.CError(source: "libmaxminddb", code: status, text: String(cString: MMDB_strerror(status)))
            if status == MMDB_IO_ERROR || status == MMDB_FILE_OPEN_ERROR || status == MMDB_OUT_OF_MEMORY_ERROR {
                throw GeoError(code: .unreadable, message: "cannot read geo database '\(path)'", path: path, underlying: cause)
            }
            throw GeoError(code: .invalidDatabase, message: "'\(path)' is not a valid MaxMind DB (.mmdb) file", path: path, underlying: cause)
        }
        let m = db.pointee.metadata
        let type = m.database_type.map { String(cString: $0) } ?? ""
        var languages: [String] = []
        if let names = m.languages.names {
            for i in 0..<Int(m.languages.count) { if let n = names[i] { languages.append(String(cString: n)) } }
        }
        guard type.contains("City") || type.contains("Enterprise") else {
            MMDB_close(db)
            db.deallocate()
            throw GeoError(
                code: .notCityDatabase,
                message: "geo database '\(path)' is not a city database (type '\(type)'; expected e.g. GeoLite2-City or GeoIP2-City)",
                path: path)
        }
        self.mmdb = db
        self.stamp = stamp
        self.isPrivateCopy = privateCopy
        self.metadata = GeoMetadata(
            databaseType: type, languages: languages, buildEpoch: m.build_epoch, ipVersion: Int(m.ip_version),
            nodeCount: Int(m.node_count))
    }

    deinit {
        MMDB_close(mmdb)
        mmdb.deallocate()
    }

    /// Copies the open file into an anonymous memory file; returns its descriptor, or nil when memfd is not
    /// available. Throws `.fileChanging` when the file changed while being copied.
    private static func privateCopy(of fd: Int32, path: String, stamp: GeoFileStamp) throws(GeoError) -> Int32? {
        let copy = maidian_memfd("maidian-geo")
        guard copy >= 0 else { return nil }
        var ok = false
        defer { if !ok { close(copy) } }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw GeoError(code: .unreadable, message: "cannot read geo database '\(path)'", path: path, underlying: errnoError(errno))
            }
            if n == 0 { break }
            var written = 0
            while written < n {
                let w = buffer.withUnsafeBytes { write(copy, $0.baseAddress! + written, n - written) }
                if w < 0 {
                    if errno == EINTR { continue }
                    // Out of memory for the copy: map the file itself instead.
                    return nil
                }
                written += w
            }
            offset += off_t(n)
        }
        var after = stat()
        if fstat(fd, &after) != 0 || GeoFileStamp(after) != stamp || Int64(offset) != stamp.size {
            throw GeoError(code: .fileChanging, message: "geo database '\(path)' changed while it was read", path: path)
        }
        ok = true
        return copy
    }

    static func errnoError(_ e: Int32) -> GeoError.CError {
        GeoError.CError(source: "errno", code: e, text: String(cString: strerror(e)))
    }

    /// The location of `ip` (IPv4 or IPv6 text) with names in `locale`, falling back to `en` for each
    /// name the locale lacks. Nil for text that is not an address, special-purpose addresses (private,
    /// loopback, ...), addresses the database does not know, and entries without any of the three names.
    public func lookup(_ ip: String, locale: String = "en") -> GeoLocation? {
        guard let address = IPAddress(ip) else { return nil }
        return lookup(address, locale: locale)
    }

    /// The location of `address` (see ``lookup(_:locale:)-(String,_)``).
    public func lookup(_ address: IPAddress, locale: String = "en") -> GeoLocation? {
        if address.isSpecialPurpose { return nil }
        var mmdbError: Int32 = 0
        var result = address.withBytes { b in
            maidian_mmdb_lookup_bytes(mmdb, b.baseAddress!, address.isIPv4 ? 0 : 1, &mmdbError)
        }
        guard mmdbError == MMDB_SUCCESS, result.found_entry else { return nil }
        var location = GeoLocation()
        location.country = name(&result.entry, "country", locale)
        location.province = name(&result.entry, "subdivisions", locale)
        location.city = name(&result.entry, "city", locale)
        if location.country == nil && location.province == nil && location.city == nil { return nil }
        return location
    }

    /// The name of `field` in `locale`, else in `en`; nil when there is none or it is empty.
    private func name(_ entry: inout MMDB_entry_s, _ field: String, _ locale: String) -> String? {
        if let n = rawName(&entry, field, locale) { return n }
        if locale != "en" { return rawName(&entry, field, "en") }
        return nil
    }

    private func rawName(_ entry: inout MMDB_entry_s, _ field: String, _ locale: String) -> String? {
        var out: UnsafePointer<CChar>? = nil
        var len: UInt32 = 0
        let status = maidian_mmdb_name(&entry, field, locale, &out, &len)
        guard status == MMDB_SUCCESS, let out, len > 0 else { return nil }
        return out.withMemoryRebound(to: UInt8.self, capacity: Int(len)) {
            String(decoding: UnsafeBufferPointer(start: $0, count: Int(len)), as: UTF8.self)
        }
    }
}
