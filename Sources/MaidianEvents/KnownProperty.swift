/// Property names the built-in stages look for. The scanner marks which of them an event carries
/// (`Event.known`), so presence checks ("never overwrite what the client sent") cost a bit test.
public enum KnownProperty: Int, CaseIterable, Sendable {
    case ip = 0, receiveTime, project, clientTime, droppedProperties
    case country, province, city
    case model, manufacturer, os, osVersion, brand, deviceName, deviceType, screenWidth, screenHeight
    case screenName, pagePath, appVersion, title, url
    case elementPath, elementType, elementIndex, elementPosition, elementContent, elementKind
    case elementTarget, elementAction, elementContainer, elementTag
    case matchedRules, late

    /// The property's bit in `Event.known`.
    @inlinable public var bit: UInt64 { 1 << UInt64(rawValue) }

    /// The properties only the server sets (wire format §2, enrichment): a client's are dropped (and listed in
    /// `$dropped_properties`) before the server sets its own.
    public static let serverOwnedBits: UInt64 = KnownProperty.matchedRules.bit | KnownProperty.late.bit
        | KnownProperty.droppedProperties.bit | KnownProperty.clientTime.bit | KnownProperty.receiveTime.bit

    /// `Property.known` of a name that is no `KnownProperty`.
    public static let none: UInt8 = 0xFF

    /// The property name.
    public var name: StaticString {
        switch self {
        case .ip: return "$ip"
        case .receiveTime: return "$receive_time"
        case .project: return "$project"
        case .clientTime: return "$client_time"
        case .droppedProperties: return "$dropped_properties"
        case .country: return "$country"
        case .province: return "$province"
        case .city: return "$city"
        case .model: return "$model"
        case .manufacturer: return "$manufacturer"
        case .os: return "$os"
        case .osVersion: return "$os_version"
        case .brand: return "$brand"
        case .deviceName: return "$device_name"
        case .deviceType: return "$device_type"
        case .screenWidth: return "$screen_width"
        case .screenHeight: return "$screen_height"
        case .screenName: return "$screen_name"
        case .pagePath: return "$page_path"
        case .appVersion: return "$app_version"
        case .title: return "$title"
        case .url: return "$url"
        case .elementPath: return "$element_path"
        case .elementType: return "$element_type"
        case .elementIndex: return "$element_index"
        case .elementPosition: return "$element_position"
        case .elementContent: return "$element_content"
        case .elementKind: return "$element_kind"
        case .elementTarget: return "$element_target"
        case .elementAction: return "$element_action"
        case .elementContainer: return "$element_container"
        case .elementTag: return "$element_tag"
        case .matchedRules: return "$matched_rules"
        case .late: return "$late"
        }
    }

}

/// Property problems the scanner notes per event (`Event.propertyIssues`).
public enum PropertyIssues {
    /// A property name that is not valid (`Property.nameValid` false).
    public static let invalidName: UInt8 = 1
    /// A property whose value is JSON `null`.
    public static let null: UInt8 = 2
    /// An object value on a property other than `$element_content`.
    public static let object: UInt8 = 4
    /// An array value with an element that is not a string.
    public static let nonStringArrayElement: UInt8 = 8
    /// A property the server owns (`KnownProperty.serverOwnedBits`), sent by the client.
    public static let serverOwned: UInt8 = 16
}

/// The known names in one flat, allocation-free table for the scanner: entries sorted by name length.
struct KnownNameTable {
    struct Entry {
        var offset: Int32
        var bit: UInt64
    }
    private(set) var bytes: [UInt8] = []
    private(set) var entries: [Entry] = []
    /// `entries[start[n]..<start[n + 1]]` have length `n`.
    private(set) var start: [Int32] = Array(repeating: 0, count: 34)

    init() {
        let all = KnownProperty.allCases.map { k in (k.bit, k.name.withUTF8Buffer { Array($0) }) }.sorted { $0.1.count < $1.1.count }
        var counts = [Int32](repeating: 0, count: 34)
        for (bit, name) in all where name.count < 33 {
            entries.append(Entry(offset: Int32(bytes.count), bit: bit))
            bytes.append(contentsOf: name)
            counts[name.count] += 1
        }
        var acc: Int32 = 0
        for n in 0..<33 { start[n] = acc; acc += counts[n] }
        start[33] = acc
    }

    /// A view valid while `body` runs.
    func withView<R>(_ body: (View) -> R) -> R {
        bytes.withUnsafeBufferPointer { b in
            entries.withUnsafeBufferPointer { e in
                start.withUnsafeBufferPointer { s in
                    body(View(bytes: b.baseAddress!, entries: e.baseAddress!, start: s.baseAddress!))
                }
            }
        }
    }

    struct View {
        let bytes: UnsafePointer<UInt8>
        let entries: UnsafePointer<Entry>
        let start: UnsafePointer<Int32>

        /// The bit of the known name at `p[from..<to]`, or 0.
        @inline(__always)
        func classify(_ p: UnsafePointer<UInt8>, _ from: Int, _ to: Int) -> UInt64 {
            let n = to &- from
            guard n > 2, n < 33, p[from] == 0x24 else { return 0 }
            var i = Int(start[n])
            let end = Int(start[n &+ 1])
            while i < end {
                let e = entries[i]
                if Bytes.equal(p + from, bytes + Int(e.offset), n) { return e.bit }
                i &+= 1
            }
            return 0
        }
    }
}
