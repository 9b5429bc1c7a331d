import MaidianEvents
import MaidianPipeline

/// Marks the events of the team's own accounts (QA devices, employees, monitoring bots) so dashboards can
/// filter them out: every live `track` event whose `distinct_id` is in `distinct_ids` gets
/// `"$internal": true` (or the configured `property`). A property the client already sent is kept.
///
/// ```yaml
/// - kind: tag_internal_users
///   distinct_ids: [qa-iphone-01, qa-android-02]
///   property: $internal      # default
/// ```
public final class TagInternalUsersStage: Stage {
    /// The stage's YAML keys. `ConfigDecoder` rejects any other key with its file:line:column and a
    /// "did you mean" hint, because only the keys asked for below count as known.
    public struct Config: Decodable, Sendable {
        /// The `distinct_id`s to tag (login ids or anonymous ids, as the events carry them).
        public var distinctIDs: [String]
        /// Name of the boolean property added to matching events.
        public var property: String = "$internal"

        enum CodingKeys: String, CodingKey {
            case distinctIDs = "distinct_ids", property
        }

        /// A config in code (tests).
        public init(distinctIDs: [String], property: String = "$internal") {
            self.distinctIDs = distinctIDs
            self.property = property
        }

        /// Decodes and checks the YAML mapping. Errors thrown with `decoder.fail` carry the location of
        /// the offending value.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            distinctIDs = try c.decode([String].self, forKey: .distinctIDs)
            property = try c.decodeIfPresent(String.self, forKey: .property) ?? "$internal"
            if distinctIDs.isEmpty {
                throw decoder.fail(
                    "distinct_ids must list at least one id", forKey: CodingKeys.distinctIDs,
                    hint: "e.g. distinct_ids: [qa-iphone-01]", code: .badValue)
            }
            if !EventNames.isValid(property) {
                throw decoder.fail(
                    "invalid property name '\(property)'", forKey: CodingKeys.property,
                    hint: "letters, digits, _ and $, not starting with a digit, at most 100", code: .badValue)
            }
        }
    }

    /// The `kind:` in pipeline YAML.
    public static let kind = "tag_internal_users"
    /// The line `maidian-team stages` prints.
    public static let summary = "adds $internal: true to events of the listed distinct_ids (QA, staff)"

    /// The ids' UTF-8 bytes; `index` maps a hash of the bytes to a position here.
    private let ids: [[UInt8]]
    private let index: HashTable64
    /// `property` as UTF-8 (a valid name needs no JSON escaping).
    private let name: [UInt8]
    /// `"<property>":true`, copied into each batch's scratch arena once and linked to every match.
    private let fragment: [UInt8]
    private let tagged: StageCounter

    /// Builds the stage once per pipeline (per worker thread): precompute everything here.
    public init(config: Config, context: StageContext) throws {
        ids = config.distinctIDs.map { Array($0.utf8) }
        var index = HashTable64(capacity: ids.count)
        for (i, id) in ids.enumerated() where !id.isEmpty {
            index.set(id.withUnsafeBufferPointer { Self.hash($0.baseAddress!, $0.count) }, Int64(i))
        }
        self.index = index
        name = Array(config.property.utf8)
        fragment = Array("\"\(config.property)\":true".utf8)
        tagged = context.counter("tagged")
        context.logger.debug("tagging \(ids.count) distinct_ids with \(config.property)")
    }

    /// One pass over the batch. No allocation per event: ids are compared in place in the JSON arena.
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        var added = Span.absent
        for i in 0..<batch.events.count {
            let ev = batch.events[i]
            guard ev.status == .live, ev.type.isTrack, isListed(ev, batch) else { continue }
            if hasProperty(i, batch) { continue }  // never overwrite what the client sent
            if !added.isPresent {
                let start = batch.scratch.count
                batch.scratch.append(contentsOf: fragment)
                added = Span(start, batch.scratch.count)
            }
            batch.linkAdded(event: i, added)
            tagged.add()
        }
    }

    /// Whether the event's `distinct_id` is one of the configured ids.
    @inline(__always)
    private func isListed(_ ev: Event, _ batch: borrowing EventBatch) -> Bool {
        guard ev.distinctIDKind == 1 else { return false }
        if ev.distinctIDEscaped {
            // Rare (an id with \" or \u escapes): decode it first; allocating is fine on this path.
            let decoded = batch.json.withUnsafeBytes {
                unescapeJSONString(UnsafeRawBufferPointer(rebasing: $0[Int(ev.distinctID.start)..<Int(ev.distinctID.end)]))
            }
            return decoded.withUnsafeBufferPointer { lookup($0.baseAddress!, $0.count) }
        }
        return batch.json.withUnsafeBufferPointer { j in
            lookup(j.baseAddress! + Int(ev.distinctID.start), ev.distinctID.count)
        }
    }

    @inline(__always)
    private func lookup(_ p: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        guard n > 0, let i = index.get(Self.hash(p, n)) else { return false }
        // Confirm the bytes: a hash match alone could be a collision.
        return ids[Int(i)].withUnsafeBufferPointer { id in
            id.count == n && (0..<n).allSatisfy { id[$0] == p[$0] }
        }
    }

    /// Whether event `i` already has a kept property named `property`.
    @inline(__always)
    private func hasProperty(_ i: Int, _ batch: borrowing EventBatch) -> Bool {
        let ev = batch.events[i]
        if ev.propertyCount == 0 { return false }
        let lo = Int(ev.firstProperty), hi = lo + Int(ev.propertyCount)
        return batch.json.withUnsafeBufferPointer { j in
            batch.properties.withUnsafeBufferPointer { props in
                name.withUnsafeBufferPointer { n in
                    for k in lo..<hi {
                        let p = props[k]
                        guard p.fix != .drop, p.name.count == n.count else { continue }
                        let at = j.baseAddress! + Int(p.name.start)
                        if (0..<n.count).allSatisfy({ at[$0] == n[$0] }) { return true }
                    }
                    return false
                }
            }
        }
    }

    @inline(__always)
    private static func hash(_ p: UnsafePointer<UInt8>, _ n: Int) -> UInt64 {
        var h = Hash64()
        h.add(p, n)
        return h.value
    }
}
