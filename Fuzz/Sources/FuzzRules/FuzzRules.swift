import FuzzSupport
import MaidianRules

/// A rules file's bytes through the loader (also what a worker's hot reload reads): any error is fine, a
/// crash, a hang or unbounded memory is a finding (depth and alias bombs, issue 13).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRules(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? RulesFile.parse(text, file: "fuzz-rules.yaml")
    return 0
}

/// The entry point SwiftPM links (see `fuzzerMain`).
@_cdecl("FuzzRules_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    fuzzerMain(argc, argv, fuzzRules)
}
