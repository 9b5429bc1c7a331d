import MaidianEvents

extension ConfigNode {
    /// The node as JSON text, for writing test input in YAML (`maidian test`): mappings become objects,
    /// lists arrays; a plain scalar that reads as a JSON number, `true`, `false` or null becomes one, any
    /// other scalar (and every quoted one) a string. `yes`/`no` stay strings: JSON has no such booleans.
    public var jsonText: String {
        var out: [UInt8] = []
        appendJSON(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    func appendJSON(to out: inout [UInt8]) {
        switch content {
        case let .scalar(text, style, _):
            if isNull {
                out += Array("null".utf8)
            } else if style == .plain && (text == "true" || text == "false" || Self.isJSONNumber(text)) {
                out += Array(text.utf8)
            } else {
                JSONOut.appendString(text, to: &out)
            }
        case let .mapping(entries, _):
            out.append(UInt8(ascii: "{"))
            for (i, e) in entries.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONOut.appendString(e.key, to: &out)
                out.append(UInt8(ascii: ":"))
                e.value.appendJSON(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        case let .sequence(nodes):
            out.append(UInt8(ascii: "["))
            for (i, n) in nodes.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                n.appendJSON(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// JSON's number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    static func isJSONNumber(_ text: String) -> Bool {
        var s = Substring(text).utf8[...]
        func digits() -> Int {
            let n = s.prefix { $0 >= 0x30 && $0 <= 0x39 }.count
            s = s.dropFirst(n)
            return n
        }
        if s.first == UInt8(ascii: "-") { s = s.dropFirst() }
        if s.first == UInt8(ascii: "0") {
            s = s.dropFirst()
        } else if digits() == 0 {
            return false
        }
        if s.first == UInt8(ascii: ".") {
            s = s.dropFirst()
            if digits() == 0 { return false }
        }
        if s.first == UInt8(ascii: "e") || s.first == UInt8(ascii: "E") {
            s = s.dropFirst()
            if s.first == UInt8(ascii: "+") || s.first == UInt8(ascii: "-") { s = s.dropFirst() }
            if digits() == 0 { return false }
        }
        return s.isEmpty
    }
}
