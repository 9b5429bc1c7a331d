import XCTest
final class PlaceholderRuntimeTests: XCTestCase { func testNothing() {} }
