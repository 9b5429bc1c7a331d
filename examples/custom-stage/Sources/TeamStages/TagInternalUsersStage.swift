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

    /// The ids, looked up by the bytes of each event's `distinct_id` (hashing and comparing are Maidian's).
    private let ids: TextSet
    private let name: [UInt8]
    private let tagged: StageCounter

    /// Builds the stage once per pipeline (per worker thread): precompute everything here.
    public init(config: Config, context: StageContext) throws {
        ids = TextSet(config.distinctIDs.filter { !$0.isEmpty })
        name = Array(config.property.utf8)
        tagged = context.counter("tagged")
        context.logger.debug("tagging \(ids.count) distinct_ids with \(config.property)")
    }

    /// One pass over the batch through the access layer: no pointers, no allocation per event (an id
    /// sent with escapes is decoded first). The `"<property>":true` fragment is written once per batch and
    /// linked to every tagged event.
    public func process(_ batch: inout EventBatch, output: inout OutputBuffer) throws {
        var tag = Span.absent
        for i in 0..<batch.eventCount where batch.isLiveTrack(i) {
            guard batch.index(of: batch.distinctID(i), in: ids) != nil,
                  !batch.hasProperty(event: i, name: name)  // never overwrite what the client sent
            else { continue }
            if !tag.isPresent { tag = batch.fragment(name: name, bool: true) }
            batch.linkAdded(event: i, tag)
            tagged.add()
        }
    }
}
