// What rule matching needs of `ByteView`, beside the access layer's basics: an absent text told apart
// from an empty one (a rule on `$page_path: ""` must not match an event without `$page_path`), and the
// members of a JSON object read through the project's scanner (`JSONMembers`). One text type for every
// stage and for MaidianRules, instead of a second pointer-and-count type there.

extension ByteView {
    /// No text at all (a field the event does not have): a view with no address. An empty text has one, so
    /// `isPresent` tells the two apart; both have `count == 0`.
    @inlinable public static var absent: ByteView { ByteView(UnsafeBufferPointer(start: nil, count: 0)) }

    /// Whether the view holds a text (possibly empty), rather than being `absent`. Views of an arena, an
    /// array or a string are present.
    @inlinable public var isPresent: Bool { base.baseAddress != nil }

    /// Whether both are present and hold the same bytes ("exact" in wire format §4: the same UTF-8 bytes, no
    /// Unicode normalization). Unlike `equals`, an absent text equals nothing, not even an empty one.
    @inlinable public func sameText(_ other: ByteView) -> Bool {
        isPresent && other.isPresent && equals(other)
    }

    /// Whether the view is present and holds exactly `b`.
    @inlinable public func sameText(_ b: [UInt8]) -> Bool {
        isPresent && equals(b)
    }

    /// The bytes' address (nil when absent), for the pointer code of this package's matchers (hash tables,
    /// word-wise copies); stages read through the view's own methods.
    @inlinable package var start: UnsafePointer<UInt8>? { base.baseAddress }

    /// A view of `count` bytes at `start` (nil: `absent`), for the pointer code of this package's matchers.
    @inlinable package init(_ start: UnsafePointer<UInt8>?, _ count: Int) {
        self.init(UnsafeBufferPointer(start: start, count: count))
    }
}

// MARK: - JSON objects

extension ByteView {
    /// Calls `body` with each member of the JSON object the view holds: its key as written (escapes
    /// undecoded), whether the key has escapes, and the value's range in the view (quotes included), in
    /// order, while `body` returns true (`JSONMembers.forEach`).
    public func forEachJSONMember(_ body: (_ key: ByteView, _ keyEscaped: Bool, _ value: Range<Int>) -> Bool) {
        guard isPresent else { return }
        JSONMembers.forEach(in: UnsafeRawBufferPointer(base)) { key, escaped, value in
            body(ByteView(UnsafeBufferPointer(start: key.baseAddress?.assumingMemoryBound(to: UInt8.self), count: key.count)), escaped, value)
        }
    }

    /// The value range (in the view, quotes included) of the first member of the JSON object the view holds
    /// whose decoded key is `key`, or nil.
    public func jsonMember(_ key: ByteView) -> Range<Int>? {
        guard isPresent else { return nil }
        return JSONMembers.member(UnsafeRawBufferPointer(key.base), in: UnsafeRawBufferPointer(base))
    }

    /// `jsonMember` with the key as bytes.
    public func jsonMember(_ key: [UInt8]) -> Range<Int>? {
        key.withByteView { jsonMember($0) }
    }

    /// Depth-first search for `key` (decoded UTF-8) in the JSON object the view holds: a member of the object
    /// itself first, else inside its object values in order (wire format §4, `pagePara` from `$element_content`).
    public func jsonMemberDepthFirst(_ key: ByteView) -> Range<Int>? {
        if let r = jsonMember(key) { return r }
        var found: Range<Int>?
        forEachJSONMember { _, _, value in
            guard self[value.lowerBound] == 0x7B else { return true }
            if let r = self[value].jsonMemberDepthFirst(key) {
                found = (r.lowerBound + value.lowerBound)..<(r.upperBound + value.lowerBound)
                return false
            }
            return true
        }
        return found
    }

    /// The decoded text of the JSON string literal (quotes included) the view holds, or nil when it holds
    /// no string.
    public var jsonString: String? {
        guard isPresent else { return nil }
        return JSONMembers.string(UnsafeRawBufferPointer(base))
    }

    /// The bytes with JSON string escapes decoded (the view holds string content, without quotes).
    public var unescaped: [UInt8] {
        unescapeJSONString(UnsafeRawBufferPointer(base))
    }

    /// Whether some byte is a backslash (JSON string content with escapes).
    @inlinable public var hasBackslash: Bool {
        guard let p = base.baseAddress else { return false }
        return Bytes.hasBackslash(p, count)
    }
}
