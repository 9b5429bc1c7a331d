import Foundation
import MaidianGeo
import XCTest

@testable import MaidianStages

/// When a reloadable file (rules file, geo database) is due for loading.
final class FileWatchTests: XCTestCase {
    private func tempFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-watch-\(getpid())-\(UUID().uuidString)").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// Replaces the file by a new one (a new inode), as `mv` of a finished copy does.
    private func replace(_ path: String, _ text: String) throws {
        try text.write(toFile: path + ".new", atomically: false, encoding: .utf8)
        _ = rename(path + ".new", path)
    }

    func testAChangedFileIsDueUntilLoaded() throws {
        let path = try tempFile("v1")
        var watch = FileWatch(path: path, every: .zero, loaded: GeoFileStamp(path: path))
        XCTAssertEqual(watch.check(), .unchanged)
        try replace(path, "v2 longer")
        guard case .changed(let stamp) = watch.check() else { return XCTFail("a replaced file is due") }
        XCTAssertEqual(stamp, GeoFileStamp(path: path))
        XCTAssertEqual(watch.check(), .changed(stamp), "due until the stage says it is loaded")
        watch.loaded(stamp)
        XCTAssertEqual(watch.check(), .unchanged)
    }

    func testAVersionThatFailedIsNotTriedAgainUntilTheFileChanges() throws {
        let path = try tempFile("good")
        var watch = FileWatch(path: path, every: .zero, loaded: GeoFileStamp(path: path))
        try replace(path, "bad version")
        guard case .changed(let bad) = watch.check() else { return XCTFail("due") }
        watch.failed(bad)
        XCTAssertEqual(watch.check(), .unchanged)
        try replace(path, "fixed version!")
        guard case .changed(let fixed) = watch.check() else { return XCTFail("a fixed file is due again") }
        XCTAssertNotEqual(fixed, bad)
    }

    func testAGoneFileIsReportedOnceUntilItIsBack() throws {
        let path = try tempFile("v1")
        var watch = FileWatch(path: path, every: .zero, loaded: GeoFileStamp(path: path))
        try FileManager.default.removeItem(atPath: path)
        XCTAssertEqual(watch.check(), .gone)
        XCTAssertEqual(watch.check(), .unchanged)
        try "v2 is back".write(toFile: path, atomically: true, encoding: .utf8)
        guard case .changed = watch.check() else { return XCTFail("a file that is back with a new version is due") }
        try FileManager.default.removeItem(atPath: path)
        XCTAssertEqual(watch.check(), .gone, "reported again after it was back")
    }

    func testNotLookedAtBeforeTheInterval() throws {
        let path = try tempFile("v1")
        var watch = FileWatch(path: path, every: .seconds(600), loaded: GeoFileStamp(path: path))
        try replace(path, "v2 longer")
        XCTAssertEqual(watch.check(), .unchanged)
        guard case .changed = watch.check(anyway: true) else { return XCTFail("looked at when asked") }
    }
}
