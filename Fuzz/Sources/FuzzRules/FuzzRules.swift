import MaidianRules

/// A rules file's bytes through the loader (also what a worker's hot reload reads): any error is fine, a
/// crash, a hang or unbounded memory is a finding (depth and alias bombs, issue 13).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRules(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? RulesFile.parse(text, file: "fuzz-rules.yaml")
    return 0
}

// SwiftPM links an executable's entry point as `FuzzRules_main` (and aliases `main` to it): hand over to
// libFuzzer's driver there.
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt

@_cdecl("FuzzRules_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var argc = argc
    var argv = argv
    return runFuzzerDriver(&argc, &argv, fuzzRules)
}
