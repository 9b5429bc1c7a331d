import Foundation
import MaidianGeo
import XCTest

/// The test database of the sample traffic (`testdata/geo/test-city.mmdb`, GeoIP2-City layout, `en` and
/// `zh-CN` names) and variants of it made by replacing equal-length strings in its bytes.
enum TestGeo {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let path = root.appendingPathComponent("testdata/geo/test-city.mmdb").path

    /// The test database with `replacements` (each the same length in UTF-8) applied, written to a temp file.
    static func variant(_ replacements: [(String, String)], name: String = "variant") throws -> String {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        for (from, to) in replacements {
            let f = Array(from.utf8), t = Array(to.utf8)
            precondition(f.count == t.count)
            guard let at = firstRange(of: f, in: bytes) else { throw CocoaError(.fileReadCorruptFile) }
            bytes.replaceSubrange(at..<(at + f.count), with: t)
        }
        let out = tempDirectory().appendingPathComponent("\(name).mmdb")
        try Data(bytes).write(to: out)
        return out.path
    }

    static func firstRange(of needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i..<(i + needle.count)].elementsEqual(needle) { return i }
        return nil
    }

    static func tempDirectory() -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("maidian-geo-\(getpid())-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }
}

final class GeoDatabaseTests: XCTestCase {
    func open() throws -> GeoDatabase {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: TestGeo.path), "needs testdata/geo/test-city.mmdb")
        return try GeoDatabase(path: TestGeo.path)
    }

    func testMetadata() throws {
        let db = try open()
        XCTAssertEqual(db.metadata.databaseType, "GeoIP2-City")
        XCTAssertEqual(Set(db.metadata.languages), ["en", "zh-CN"])
        XCTAssertEqual(db.metadata.ipVersion, 6)
        XCTAssertTrue(db.isPrivateCopy, "Linux: read into private memory")
    }

    func testIPv4CityInLocale() throws {
        let db = try open()
        XCTAssertEqual(db.lookup("125.70.56.154", locale: "zh-CN"), GeoLocation(country: "中国", province: "四川", city: "成都"))
        XCTAssertEqual(db.lookup("125.70.56.154", locale: "en"), GeoLocation(country: "China", province: "Sichuan", city: "Chengdu"))
        XCTAssertEqual(db.lookup("8.8.8.215", locale: "zh-CN"), GeoLocation(country: "美国", province: "加利福尼亚州", city: "山景城"))
        XCTAssertEqual(db.lookup("58.246.243.7", locale: "zh-CN"), GeoLocation(country: "中国", province: "上海", city: "上海"))
    }

    func testIPv6() throws {
        let db = try open()
        let beijing = GeoLocation(country: "中国", province: "北京", city: "北京")
        XCTAssertEqual(db.lookup("2001:da8::150:185", locale: "zh-CN"), beijing)
        XCTAssertEqual(db.lookup("2001:0da8:0000:0000:0000:0000:0150:0185", locale: "zh-CN"), beijing, "uncompressed form")
        XCTAssertEqual(db.lookup("2001:DA8::17:223", locale: "zh-CN"), beijing, "upper case")
        XCTAssertEqual(db.lookup("2001:da8::150:185", locale: "en")?.city, "Beijing")
        // IPv4-mapped IPv6 is the IPv4 address.
        XCTAssertEqual(db.lookup("::ffff:125.70.56.154", locale: "zh-CN")?.city, "成都")
        XCTAssertEqual(IPAddress("::ffff:1.2.3.4"), IPAddress("1.2.3.4"))
    }

    func testCountryOnlyEntries() throws {
        let db = try open()
        XCTAssertEqual(db.lookup("1.0.1.3", locale: "zh-CN"), GeoLocation(country: "中国"))
        XCTAssertEqual(db.lookup("1.0.1.251", locale: "en"), GeoLocation(country: "China"))
    }

    func testLocaleFallsBackToEnglish() throws {
        let db = try open()
        XCTAssertEqual(db.lookup("125.70.56.154", locale: "fr"), GeoLocation(country: "China", province: "Sichuan", city: "Chengdu"))
        XCTAssertEqual(db.lookup("2001:da8::150:185", locale: "pt-BR"), GeoLocation(country: "China", province: "Beijing", city: "Beijing"))
    }

    func testPrivateAndSpecialAddressesResolveToNothing() throws {
        let db = try open()
        let special = [
            "10.1.79.65", "10.0.0.1", "172.16.0.1", "172.31.255.254", "192.168.1.1", "127.0.0.1", "169.254.10.10",
            "100.64.0.1", "100.127.255.255", "0.0.0.0", "192.0.2.1", "198.18.0.1", "224.0.0.1", "255.255.255.255",
            "::", "::1", "fe80::1", "fe80::1%eth0", "fc00::1", "fd12:3456::1", "ff02::1", "2001:db8::1", "::ffff:10.0.0.1",
        ]
        for ip in special {
            XCTAssertNotNil(IPAddress(ip), ip)
            XCTAssertTrue(IPAddress(ip)?.isSpecialPurpose == true, ip)
            XCTAssertNil(db.lookup(ip, locale: "zh-CN"), ip)
        }
        for ip in ["172.32.0.1", "100.128.0.1", "11.0.0.1", "2001:da8::1", "1.0.1.3"] {
            XCTAssertEqual(IPAddress(ip)?.isSpecialPurpose, false, ip)
        }
    }

    func testUnknownAndMalformed() throws {
        let db = try open()
        XCTAssertNil(db.lookup("9.9.9.9", locale: "zh-CN"), "not in the test database")
        XCTAssertNil(db.lookup("2a00:1450::1", locale: "zh-CN"))
        for bad in ["", "x", "1.2.3", "1.2.3.4.5", "256.1.1.1", " 1.0.1.3", "1.0.1.3 ", "1.0.1.3,8.8.8.8", "2001:da8:::1", "::g"] {
            XCTAssertNil(IPAddress(bad), bad)
            XCTAssertNil(db.lookup(bad, locale: "zh-CN"), bad)
        }
    }

    func testAddressText() {
        XCTAssertEqual(IPAddress("2001:0DA8::0150:0185")?.description, "2001:da8::150:185")
        XCTAssertEqual(IPAddress("125.70.56.154")?.description, "125.70.56.154")
        XCTAssertEqual(IPAddress("125.70.56.154")?.bytes, [125, 70, 56, 154])
        XCTAssertEqual(IPAddress("::1")?.bytes, [UInt8](repeating: 0, count: 15) + [1])
    }

    func testMissingFile() {
        XCTAssertThrowsError(try GeoDatabase(path: "/nonexistent/GeoLite2-City.mmdb")) { error in
            let e = error as! GeoError
            XCTAssertEqual(e.code, .fileNotFound)
            XCTAssertTrue(e.description.contains("/nonexistent/GeoLite2-City.mmdb"), e.description)
            XCTAssertTrue(e.description.contains("does not exist"), e.description)
        }
    }

    func testTextFileIsNotADatabase() throws {
        let path = TestGeo.tempDirectory().appendingPathComponent("notes.txt").path
        try "not a database\n".write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try GeoDatabase(path: path)) { error in
            let e = error as! GeoError
            XCTAssertEqual(e.code, .invalidDatabase)
            XCTAssertTrue(e.description.contains("not a valid MaxMind DB"), e.description)
        }
    }

    func testDirectoryAndTruncatedFile() throws {
        _ = try open()
        XCTAssertThrowsError(try GeoDatabase(path: TestGeo.tempDirectory().path)) { error in
            XCTAssertEqual((error as! GeoError).code, .unreadable)
        }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: TestGeo.path))
        let half = TestGeo.tempDirectory().appendingPathComponent("half.mmdb")
        try bytes.prefix(bytes.count / 2).write(to: half)
        XCTAssertThrowsError(try GeoDatabase(path: half.path)) { error in
            XCTAssertEqual((error as! GeoError).code, .invalidDatabase)
        }
    }

    func testNonCityDatabaseIsRejected() throws {
        _ = try open()
        let path = try TestGeo.variant([("GeoIP2-City", "GeoLite2ASN")], name: "asn")
        XCTAssertThrowsError(try GeoDatabase(path: path)) { error in
            let e = error as! GeoError
            XCTAssertEqual(e.code, .notCityDatabase)
            XCTAssertTrue(e.description.contains("not a city database"), e.description)
            XCTAssertTrue(e.description.contains("GeoLite2ASN"), e.description)
        }
    }

    /// The database is a private copy: overwriting the file in place (not an atomic rename) under an open
    /// database changes nothing for it, and the file's stamp shows the change.
    func testFileRewrittenInPlaceDoesNotAffectOpenDatabase() throws {
        _ = try open()
        let path = TestGeo.tempDirectory().appendingPathComponent("live.mmdb").path
        try FileManager.default.copyItem(atPath: TestGeo.path, toPath: path)
        let db = try GeoDatabase(path: path)
        XCTAssertEqual(GeoFileStamp(path: path), db.stamp)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data("garbage".utf8))
        try handle.close()
        XCTAssertNotEqual(GeoFileStamp(path: path), db.stamp)
        XCTAssertEqual(db.lookup("125.70.56.154", locale: "zh-CN")?.city, "成都")
        XCTAssertEqual(db.lookup("2001:da8::150:185", locale: "zh-CN")?.city, "北京")
    }
}
