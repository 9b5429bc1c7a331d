import MaidianEvents

/// The operating system a User-Agent names: what the `device` stage adds as `$os` and `$os_version` to events
/// whose client sent no `$os` (wire format §2, enrichment).
public struct UserAgentOS: Sendable, Equatable {
    /// An operating system, spelled as the SDKs spell `$os`.
    public enum Name: UInt8, Sendable, CaseIterable {
        /// iPhone, iPad and iPod touch. iPadOS is reported as `iOS`, as the iOS SDK does (the sample's iPads
        /// send `"$os":"iOS"`), so one dashboard value covers both.
        case iOS
        case android
        case harmonyOS
        case macOS

        /// The `$os` value.
        public var text: StaticString {
            switch self {
            case .iOS: return "iOS"
            case .android: return "Android"
            case .harmonyOS: return "HarmonyOS"
            case .macOS: return "macOS"
            }
        }
    }

    /// The system.
    public var name: Name
    /// Its version, digits and dots (`16.7`, `13`), or nil when the User-Agent does not say.
    public var version: String?

    /// Creates a result.
    public init(_ name: Name, _ version: String?) {
        self.name = name
        self.version = version
    }
}

/// A hand-written User-Agent reader for the forms mobile apps send (no regular expressions): byte scans
/// for a handful of tokens, in this order.
///
/// | User-Agent (examples) | result |
/// | --- | --- |
/// | `Mozilla/5.0 (Phone; OpenHarmony 5.0) …`, `… HarmonyOS 4.0 …` | HarmonyOS `5.0` |
/// | `Dalvik/2.1.0 (Linux; U; Android 13; V2227A Build/…)`, `Mozilla/5.0 (Linux; Android 14; …)` | Android `13` |
/// | `Mozilla/5.0 (iPhone; CPU iPhone OS 16_7 like Mac OS X) …`, `(iPad; CPU OS 17_4 like Mac OS X)` | iOS `16.7` |
/// | `ShopApp/3.2.1 (iPhone; iOS 16.7; Scale/3.00)`, `… iPadOS 17.0 …`, `App iOS/16.7` | iOS `16.7` |
/// | `Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) …` | macOS `10.15.7` |
/// | `ShopApp/3.2.1 CFNetwork/1410.0.3 Darwin/22.6.0` | iOS `16.6` (from the Darwin version, below) |
/// | `… (iPhone; …)`, `… CFNetwork/…` with no version anywhere | iOS, no version |
/// | `okhttp/4.9.0`, `Dalvik/2.1.0` with no `Android n` | Android, no version |
///
/// Anything else gives nil (nothing is added). CFNetwork User-Agents look the same from iOS and macOS apps;
/// they are read as iOS because Maidian's input is mobile apps (a Mac SDK sends its own `$os`). The Darwin
/// version maps to the iOS version as Apple ships them: Darwin 21 to 24 are iOS 15 to 18 with the same minor
/// version (`Darwin/23.4.0` is iOS `17.4`), Darwin 25 and later are iOS 26 and later (`Darwin/25.1.0` is `26.1`),
/// Darwin 13 to 20 give only the major version (iOS 7 to 14; their minor versions do not line up).
public enum UserAgent {
    /// The operating system named by a User-Agent, or nil.
    public static func os(_ ua: ByteView) -> UserAgentOS? {
        guard ua.count > 0 else { return nil }
        let s = Text(p: ua)

        if let at = s.find("OpenHarmony") { return UserAgentOS(.harmonyOS, s.version(after: at + 11)) }
        if let at = s.findToken("HarmonyOS") { return UserAgentOS(.harmonyOS, s.version(after: at + 9)) }
        if let at = s.findToken("Android") { return UserAgentOS(.android, s.version(after: at + 7)) }

        // iOS: the Safari/WebView form, then app forms (`iOS 16.7`, `iPadOS 17.0`, `iOS/16.7`).
        if let at = s.find("iPhone OS ") { return UserAgentOS(.iOS, s.version(after: at + 10)) }
        if let at = s.find("CPU OS ") { return UserAgentOS(.iOS, s.version(after: at + 7)) }
        if let at = s.findToken("iPadOS"), let v = s.version(after: at + 6) { return UserAgentOS(.iOS, v) }
        if let at = s.findToken("iOS"), let v = s.version(after: at + 3) { return UserAgentOS(.iOS, v) }
        let appleDevice = s.find("iPhone") != nil || s.find("iPad") != nil || s.find("iPod") != nil

        if !appleDevice, let at = s.find("Mac OS X") { return UserAgentOS(.macOS, s.version(after: at + 8)) }
        if !appleDevice, s.find("Macintosh") != nil { return UserAgentOS(.macOS, nil) }

        if appleDevice || s.find("CFNetwork/") != nil {
            if let at = s.find("Darwin/") { return UserAgentOS(.iOS, darwinToIOS(s, at + 7)) }
            return UserAgentOS(.iOS, nil)
        }
        if s.findIgnoringCase("okhttp") != nil || s.find("Dalvik/") != nil { return UserAgentOS(.android, nil) }
        return nil
    }

    /// The operating system named by a User-Agent, or nil (tests, rare paths).
    public static func os(_ ua: String) -> UserAgentOS? {
        ua.withByteView { os($0) }
    }

    /// `Darwin/<major>.<minor>…` at `i` as an iOS version (see the type's documentation).
    private static func darwinToIOS(_ s: Text, _ i: Int) -> String? {
        var j = i
        guard let major = s.number(&j), major >= 13, major < 100 else { return nil }
        var minor = -1
        if j < s.n && s.p[j] == UInt8(ascii: ".") {
            j += 1
            minor = s.number(&j) ?? -1
        }
        if major <= 20 { return String(major - 6) }
        let ios = major >= 25 ? major + 1 : major - 6
        return minor >= 0 && minor < 100 ? "\(ios).\(minor)" : String(ios)
    }

    /// The User-Agent's bytes, with the searches the matchers above use.
    struct Text {
        let p: ByteView
        var n: Int { p.count }

        /// First position of `needle`, or nil.
        func find(_ needle: StaticString) -> Int? {
            let m = needle.utf8CodeUnitCount
            guard m > 0, m <= n else { return nil }
            return p.firstIndex(of: needle)
        }

        /// First position of `needle`, ASCII case ignored, or nil.
        func findIgnoringCase(_ needle: StaticString) -> Int? {
            let m = needle.utf8CodeUnitCount
            guard m > 0, m <= n else { return nil }
            let q = needle.utf8Start
            var i = 0
            outer: while i + m <= n {
                for k in 0..<m where DeviceASCII.lower(p[i + k]) != DeviceASCII.lower(q[k]) {
                    i += 1
                    continue outer
                }
                return i
            }
            return nil
        }

        /// First position of `needle` as a word: at the start or after a space, `(`, `;` or `,`; not followed by a
        /// letter (`ShopApp-iOS/3.2.1` names the app, not the system).
        func findToken(_ needle: StaticString) -> Int? {
            let m = needle.utf8CodeUnitCount
            guard m > 0, m <= n else { return nil }
            let q = needle.utf8Start
            var i = 0
            while i + m <= n {
                if p[i] == q[0] && p.has(needle, at: i)
                    && (i == 0 || p[i - 1] == 0x20 || p[i - 1] == UInt8(ascii: "(") || p[i - 1] == UInt8(ascii: ";") || p[i - 1] == UInt8(ascii: ","))
                    && (i + m == n || !DeviceASCII.isLetter(p[i + m])) {
                    return i
                }
                i += 1
            }
            return nil
        }

        /// The version after a token: skips one separator (space, `/`, `-`, `_`), then reads digits, dots and
        /// underscores (underscores become dots). Nil unless it starts with a digit. At most 20 bytes.
        func version(after i: Int) -> String? {
            var j = i
            if j < n && (p[j] == 0x20 || p[j] == UInt8(ascii: "/") || p[j] == UInt8(ascii: "-") || p[j] == UInt8(ascii: "_")) { j += 1 }
            guard j < n, DeviceASCII.isDigit(p[j]) else { return nil }
            var out: [UInt8] = []
            while j < n && out.count < 20 {
                let c = p[j]
                if DeviceASCII.isDigit(c) {
                    out.append(c)
                } else if c == UInt8(ascii: ".") || c == UInt8(ascii: "_") {
                    guard j + 1 < n, DeviceASCII.isDigit(p[j + 1]) else { break }
                    out.append(UInt8(ascii: "."))
                } else {
                    break
                }
                j += 1
            }
            return String(decoding: out, as: UTF8.self)
        }

        /// A decimal number at `j` (advancing `j`), or nil.
        func number(_ j: inout Int) -> Int? {
            guard j < n, DeviceASCII.isDigit(p[j]) else { return nil }
            var v = 0
            while j < n && DeviceASCII.isDigit(p[j]) && v < 1_000_000 {
                v = v * 10 + Int(p[j] - 0x30)
                j += 1
            }
            return v
        }
    }
}

/// ASCII byte tests for the device stage's hand-written matchers.
enum DeviceASCII {
    @inline(__always) static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    @inline(__always) static func isLetter(_ c: UInt8) -> Bool { (c | 0x20) >= 0x61 && (c | 0x20) <= 0x7A }
    @inline(__always) static func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c | 0x20 : c }
}
