import Logging
import Synchronization
import XCTest

@testable import MaidianRuntime

/// The test-fault hook counts records over batches and acts once its count is reached.
final class TestFaultsTests: XCTestCase {
    final class Calls: @unchecked Sendable {
        var fatal: [String] = []
        var stopChecks = 0
    }

    func context(_ calls: Calls) -> WorkerHookContext {
        WorkerHookContext(
            logger: Logger(label: "test-faults") { _ in SwiftLogNoOpLogHandler() },
            fatal: { !calls.fatal.isEmpty }, raiseFatal: { calls.fatal.append($0) },
            stop: {
                calls.stopChecks += 1
                return calls.stopChecks >= 3
            })
    }

    func testFatalErrorOnceEnoughRecordsWereProcessed() throws {
        let faults = try TestFaults(parsing: "fatal-after=25")
        let calls = Calls()
        faults.willProcess(records: 10, worker: context(calls))
        faults.willProcess(records: 10, worker: context(calls))
        XCTAssertEqual(calls.fatal, [])
        faults.willProcess(records: 10, worker: context(calls))
        XCTAssertEqual(calls.fatal, ["test fault fatal-after=25"])
        faults.willProcess(records: 10, worker: context(calls))
        XCTAssertEqual(calls.fatal.count, 1, "raised once")
        XCTAssertEqual(calls.stopChecks, 0)
    }

    func testStallHoldsTheLoopUntilAStopRequest() throws {
        let faults = try TestFaults(parsing: "stall-after=5,")
        let calls = Calls()
        faults.willProcess(records: 4, worker: context(calls))
        XCTAssertEqual(calls.stopChecks, 0)
        faults.willProcess(records: 1, worker: context(calls))
        XCTAssertEqual(calls.stopChecks, 3, "waited until the third check saw the stop request")
    }

    func testParsing() throws {
        let f = try TestFaults(parsing: "fatal-after=3,stall-after=7")
        XCTAssertEqual(f.fatalAfterRecords, 3)
        XCTAssertEqual(f.stallAfterRecords, 7)
        XCTAssertNil(try TestFaults(parsing: "").fatalAfterRecords)
        XCTAssertThrowsError(try TestFaults(parsing: "explode-after=3"))
        XCTAssertThrowsError(try TestFaults(parsing: "fatal-after=-1"))
        XCTAssertThrowsError(try TestFaults(parsing: "fatal-after"))
    }
}
