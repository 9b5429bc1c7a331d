#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address. IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) are read as the IPv4 address.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// Whether this is an IPv4 address (then `low` holds it in its lower 32 bits and `high` is 0).
    public let isIPv4: Bool
    /// The first 64 bits of an IPv6 address (network order as a number).
    public let high: UInt64
    /// The last 64 bits of an IPv6 address, or the IPv4 address.
    public let low: UInt64

    /// An IPv4 address from its 32-bit value (`0x7F000001` is 127.0.0.1).
    public init(ipv4 value: UInt32) {
        self.init(isIPv4: true, high: 0, low: UInt64(value))
    }

    private init(isIPv4: Bool, high: UInt64, low: UInt64) {
        self.isIPv4 = isIPv4
        self.high = high
        self.low = low
    }

    /// An IPv6 address from its two halves; an IPv4-mapped address becomes IPv4.
    public init(ipv6High high: UInt64, low: UInt64) {
        if high == 0 && low >> 32 == 0xFFFF {
            self.init(ipv4: UInt32(truncatingIfNeeded: low))
        } else {
            self.init(isIPv4: false, high: high, low: low)
        }
    }

    /// Parses the text form (`1.2.3.4`, `2001:db8::1`, `::ffff:1.2.3.4`; a zone `%eth0` is ignored).
    /// Nil for anything else, including surrounding blanks.
    public init?(_ text: String) {
        var text = text
        guard let a = text.withUTF8({ IPAddress(utf8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = a
    }

    /// Parses the UTF-8 text form (see ``init(_:)``) without allocating.
    public init?(utf8 text: UnsafeRawBufferPointer) {
        var n = text.count
        // Cut a zone index (`fe80::1%eth0`).
        if let pct = text.firstIndex(of: UInt8(ascii: "%")) { n = pct }
        guard n >= 2, n <= 45 else { return nil }
        var isV6 = false
        for i in 0..<n {
            let c = text[i]
            if c == UInt8(ascii: ":") { isV6 = true; continue }
            let ok = (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: ".") || (c | 0x20 >= 0x61 && c | 0x20 <= 0x66)
            if !ok { return nil }
        }
        let parsed: IPAddress? = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 48) { buf in
            for i in 0..<n { buf[i] = CChar(bitPattern: text[i]) }
            buf[n] = 0
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { out in
                let family = isV6 ? AF_INET6 : AF_INET
                guard inet_pton(family, buf.baseAddress!, out.baseAddress!) == 1 else { return nil }
                if !isV6 {
                    return IPAddress(ipv4: UInt32(out[0]) << 24 | UInt32(out[1]) << 16 | UInt32(out[2]) << 8 | UInt32(out[3]))
                }
                var hi: UInt64 = 0, lo: UInt64 = 0
                for i in 0..<8 { hi = hi << 8 | UInt64(out[i]) }
                for i in 8..<16 { lo = lo << 8 | UInt64(out[i]) }
                return IPAddress(ipv6High: hi, low: lo)
            }
        }
        guard let parsed else { return nil }
        self = parsed
    }

    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        withBytes { out = Array($0) }
        return out
    }

    /// Calls `body` with the network-order bytes (4 or 16), without allocating.
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        var raw: (UInt64, UInt64) = (high.bigEndian, low.bigEndian)
        return try withUnsafeBytes(of: &raw) { p in
            let all = p.bindMemory(to: UInt8.self)
            return try body(isIPv4 ? UnsafeBufferPointer(rebasing: all[12..<16]) : all)
        }
    }

    /// Whether the address is private or otherwise special-purpose (loopback, link-local, carrier-grade NAT,
    /// documentation, benchmarking, multicast, reserved, unspecified): no place on a map.
    public var isSpecialPurpose: Bool {
        if isIPv4 {
            let v = UInt32(truncatingIfNeeded: low)
            for (prefix, bits) in IPAddress.specialIPv4 where v >> (32 - bits) == prefix >> (32 - bits) { return true }
            return false
        }
        for (prefix, bits) in IPAddress.specialIPv6 where high >> (64 - bits) == prefix >> (64 - bits) {
            return true
        }
        // ::/128 unspecified, ::1/128 loopback, 100::/64 discard-only.
        if high == 0 && (low == 0 || low == 1) { return true }
        if high == 0x0100_0000_0000_0000 { return true }
        return false
    }

    /// IANA special-purpose IPv4 blocks (RFC 6890 and successors), as (prefix, length).
    static let specialIPv4: [(UInt32, UInt32)] = [
        (0x0000_0000, 8),   // 0.0.0.0/8 "this network"
        (0x0A00_0000, 8),   // 10.0.0.0/8 private
        (0x6440_0000, 10),  // 100.64.0.0/10 carrier-grade NAT
        (0x7F00_0000, 8),   // 127.0.0.0/8 loopback
        (0xA9FE_0000, 16),  // 169.254.0.0/16 link-local
        (0xAC10_0000, 12),  // 172.16.0.0/12 private
        (0xC000_0000, 24),  // 192.0.0.0/24 protocol assignments
        (0xC000_0200, 24),  // 192.0.2.0/24 documentation
        (0xC0A8_0000, 16),  // 192.168.0.0/16 private
        (0xC612_0000, 15),  // 198.18.0.0/15 benchmarking
        (0xC633_6400, 24),  // 198.51.100.0/24 documentation
        (0xCB00_7100, 24),  // 203.0.113.0/24 documentation
        (0xE000_0000, 4),   // 224.0.0.0/4 multicast
        (0xF000_0000, 4),   // 240.0.0.0/4 reserved, broadcast
    ]

    /// Special-purpose IPv6 blocks no longer than /64, as (first 64 bits, length).
    static let specialIPv6: [(UInt64, UInt64)] = [
        (0xFC00_0000_0000_0000, 7),   // fc00::/7 unique local
        (0xFE80_0000_0000_0000, 10),  // fe80::/10 link-local
        (0xFEC0_0000_0000_0000, 10),  // fec0::/10 site-local (deprecated)
        (0xFF00_0000_0000_0000, 8),   // ff00::/8 multicast
        (0x2001_0DB8_0000_0000, 32),  // 2001:db8::/32 documentation
    ]

    /// The standard text form.
    public var description: String {
        withBytes { b in
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buf in
                guard inet_ntop(isIPv4 ? AF_INET : AF_INET6, b.baseAddress!, buf.baseAddress!, 64) != nil else { return "?" }
                return String(cString: buf.baseAddress!)
            }
        }
    }
}
