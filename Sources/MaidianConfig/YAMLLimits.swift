import CYaml

/// Bounds on the shape of a YAML document, checked before it is composed into a tree.
///
/// Composing (Yams) and converting (``ConfigDocument``) recurse once per nesting level, so about 5,000
/// levels of `[[[[…` overflow the stack; and aliases are expanded into copies, so a kilobyte of nested
/// aliases ("billion laughs", also through `<<` merge keys) grows without bound. The check runs
/// libyaml's event parser, which keeps its own stacks and does not recurse, and stops at the first
/// limit passed: neither the stack nor the memory it uses depend on what the document would expand to.
public struct YAMLLimits: Sendable, Equatable {
    /// Most nested mappings and sequences (the root counts as 1). Pipelines need about 6, rules files about 8.
    public var maxDepth: Int
    /// Most nodes that aliases (`*name`, also after `<<`) may add in all: each alias adds the nodes of what
    /// it names (each scalar, mapping and sequence counts 1). Nodes written out in the text are bounded by
    /// the text's size and do not count, so big rules files are fine; repeated aliases of aliases are not.
    public var maxAliasNodes: Int

    /// The limits every pipeline and rules file is loaded with.
    public static let `default` = YAMLLimits(maxDepth: 64, maxAliasNodes: 100_000)

    /// Creates limits.
    public init(maxDepth: Int, maxAliasNodes: Int) {
        self.maxDepth = maxDepth
        self.maxAliasNodes = maxAliasNodes
    }

    /// Checks `yaml` against the limits.
    ///
    /// - Throws: ``PipelineError`` `.tooLarge` located at the node that passes a limit. Syntax errors are
    ///   not reported here (the composer reports them, with its own wording): the check just stops.
    public func check(_ yaml: String, file: String) throws {
        var text = yaml
        try text.withUTF8 { try check(bytes: $0, file: file) }
    }

    private func check(bytes: UnsafeBufferPointer<UInt8>, file: String) throws {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { return }
        defer { yaml_parser_delete(&parser) }
        yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
        yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count)

        // Per open collection: the node count when it started, and its anchor (to size it at its end).
        var open: [(start: Int, anchor: String?)] = []
        var anchorSizes: [String: Int] = [:]
        var nodes = 0
        var aliasNodes = 0
        var event = yaml_event_t()
        while true {
            guard yaml_parser_parse(&parser, &event) == 1 else { return }
            defer { yaml_event_delete(&event) }
            let mark = event.start_mark
            func located(_ message: String, _ hint: String) -> PipelineError {
                PipelineError(
                    code: .tooLarge, message: message,
                    location: SourceLocation(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1),
                    hint: hint)
            }
            switch event.type {
            case YAML_STREAM_END_EVENT:
                return
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                nodes += 1
                let anchor = event.type == YAML_SEQUENCE_START_EVENT
                    ? event.data.sequence_start.anchor : event.data.mapping_start.anchor
                open.append((nodes, anchor.map { String(cString: $0) }))
                if open.count > maxDepth {
                    throw located(
                        "mappings and lists are nested more than \(maxDepth) deep",
                        "a pipeline or rules file needs far fewer levels")
                }
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                if let (start, anchor) = open.popLast(), let anchor { anchorSizes[anchor] = nodes - start + 1 }
            case YAML_SCALAR_EVENT:
                nodes += 1
                if let anchor = event.data.scalar.anchor { anchorSizes[String(cString: anchor)] = 1 }
            case YAML_ALIAS_EVENT:
                // An undefined alias is the composer's error to report; count it as one node.
                let name = event.data.alias.anchor.map { String(cString: $0) } ?? ""
                let size = anchorSizes[name] ?? 1
                nodes += size
                aliasNodes += size
                if aliasNodes > maxAliasNodes {
                    throw located(
                        "aliases (*name, also after <<) expand to more than \(maxAliasNodes) values in all",
                        "aliases of mappings that hold aliases multiply the size; write the values out")
                }
            default:
                continue
            }
        }
    }
}
