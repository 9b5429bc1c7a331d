// Pipeline files are YAML with positions: whoever imports MaidianPipeline (stages, custom builds) gets the
// config layer's types (`ConfigDuration`, `PipelineError`, `ConfigDecoder`, `Setting`) without a second import.
@_exported import MaidianConfig
