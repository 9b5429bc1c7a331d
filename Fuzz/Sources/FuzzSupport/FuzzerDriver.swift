@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt) -> CInt

/// Runs libFuzzer's driver on `target`. SwiftPM links an executable's entry point as `<Target>_main` (and
/// aliases `main` to it), so each target defines that symbol and calls this, instead of libFuzzer's `main`.
public func fuzzerMain(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ target: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv = argv
    return runFuzzerDriver(&argc, &argv, target)
}

/// The repository root, from this file's path (for the test data the targets' pipelines name).
public let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(4)  // Fuzz/Sources/FuzzSupport/FuzzerDriver.swift
    return parts.joined(separator: "/")
}()
