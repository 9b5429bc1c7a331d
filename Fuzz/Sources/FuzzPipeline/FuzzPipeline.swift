import FuzzSupport
import MaidianPipeline

/// A pipeline file's bytes through the loader (`maidian check` and a worker's start read it the same way):
/// any error is fine, a crash, a hang or unbounded memory is a finding (depth and alias bombs, issue 13).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPipeline(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? PipelineSpec.parse(yaml: text, file: "fuzz.yaml")
    return 0
}

/// The entry point SwiftPM links (see `fuzzerMain`).
@_cdecl("FuzzPipeline_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    fuzzerMain(argc, argv, fuzzPipeline)
}
