import Foundation
import Logging
import MaidianEvents
import MaidianPipeline
import XCTest
@testable import MaidianStages

final class DeviceStageTests: XCTestCase {
    private func harness(_ config: DeviceStage.Config = .init()) throws -> StageHarness {
        let ctx = StageHarness.context()
        return try StageHarness(stages: [
            ValidateStage(config: .init(), context: ctx),
            DeviceStage(config: config, context: ctx),
        ])
    }

    /// One record of events with these `properties` objects.
    private func record(_ properties: [String], ua: String? = nil, key: String = "install-1") -> TestRecord {
        let events = properties.enumerated().map { trackEvent(trackID: Int64($0.offset + 1), properties: $0.element) }
        var r = TestRecord(json: "[" + events.joined(separator: ",") + "]", key: key)
        r.ua = ua
        return r
    }

    private func props(_ e: (key: String, value: [String: Any], raw: String)) -> [String: Any] {
        e.value["properties"] as? [String: Any] ?? [:]
    }

    private func device(_ p: [String: Any]) -> [String?] {
        [p["$brand"] as? String, p["$device_name"] as? String, p["$device_type"] as? String]
    }

    // MARK: - the tables

    func testSwiftTablesMatchTSVFiles() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let apple = try String(contentsOf: root.appendingPathComponent("data/apple-devices.tsv"), encoding: .utf8)
        let android = try String(contentsOf: root.appendingPathComponent("data/android-manufacturers.tsv"), encoding: .utf8)
        XCTAssertEqual(DeviceTables.appleDevices, apple, "run scripts/gen-device-tables.py")
        XCTAssertEqual(DeviceTables.androidManufacturers, android, "run scripts/gen-device-tables.py")
    }

    func testBuiltinTablesParse() throws {
        let catalog = try DeviceCatalog.builtin.get()
        XCTAssertGreaterThan(catalog.apple.count, 300)
        XCTAssertEqual(catalog.appleDevice("iPhone15,2")?.name, "iPhone 14 Pro")
        XCTAssertEqual(catalog.appleDevice("iPhone15,2")?.type, .phone)
        XCTAssertEqual(catalog.appleDevice("Mac14,2")?.name, "MacBook Air (M2)")
        XCTAssertEqual(catalog.appleDevice("Mac14,2")?.type, .desktop)
        XCTAssertNil(catalog.appleDevice("iphone15,2"), "identifiers are case-sensitive")
        // Every iPhone generation, 1 to 16.
        let names = Set(catalog.apple.map(\.name))
        for name in ["iPhone", "iPhone 3G", "iPhone 3GS", "iPhone 4", "iPhone 4s", "iPhone 5", "iPhone 5s", "iPhone 6", "iPhone 6s",
                     "iPhone 7", "iPhone 8", "iPhone X", "iPhone XS", "iPhone XR", "iPhone 11", "iPhone 12", "iPhone 13",
                     "iPhone 14", "iPhone 15", "iPhone 16", "iPhone 16 Pro Max", "iPhone 16e", "iPhone SE (3rd generation)"] {
            XCTAssertTrue(names.contains(name), name)
        }
        // Every row's type matches its family, and the in-place lookup (short identifiers through the inline
        // table, long ones through the hash table) finds every row and nothing else.
        for (k, d) in catalog.apple.enumerated() {
            XCTAssertEqual(DeviceCatalog.appleFamily(d.identifier), d.type, d.identifier)
            let bytes = Array(("x" + d.identifier + "9\"").utf8) + [UInt8](repeating: 0x39, count: 24)
            let n = d.identifier.utf8.count
            XCTAssertEqual(catalog.appleEntry(bytes, Span(1, 1 + n)), k, d.identifier)
            // Neighbouring byte ranges give what the row list says (`iPad7,1` is a prefix of `iPad7,11`).
            for (lo, hi) in [(1, n), (1, 2 + n), (0, 1 + n), (2, 1 + n)] {
                let text = String(decoding: bytes[lo..<hi], as: UTF8.self)
                XCTAssertEqual(catalog.appleEntry(bytes, Span(lo, hi)), catalog.apple.firstIndex { $0.identifier == text }, text)
            }
        }
        XCTAssertNotNil(catalog.appleDevice("RealityDevice14,1"), "an identifier longer than 16 bytes")
        XCTAssertEqual(catalog.brand(forManufacturer: "HUAWEI"), "Huawei")
        XCTAssertEqual(catalog.brand(forManufacturer: "xiaomi"), "Xiaomi")
        XCTAssertEqual(catalog.brand(forManufacturer: "XIAOMI"), "Xiaomi")
        XCTAssertEqual(catalog.brand(forManufacturer: "HONOR"), "Honor")
        XCTAssertEqual(catalog.brand(forManufacturer: "samsung"), "Samsung")
        XCTAssertNil(catalog.brand(forManufacturer: "Fairphone2"))
    }

    func testMalformedTablesAreRejected() {
        XCTAssertThrowsError(try DeviceCatalog(appleTSV: "iPhone15,2\tiPhone 14 Pro\tphablet\n", manufacturersTSV: ""))
        XCTAssertThrowsError(try DeviceCatalog(appleTSV: "iPhone15,2 iPhone 14 Pro phone\n", manufacturersTSV: ""))
        XCTAssertThrowsError(try DeviceCatalog(appleTSV: "a1,1\tA\tphone\na1,1\tB\tphone\n", manufacturersTSV: ""))
        XCTAssertThrowsError(try DeviceCatalog(appleTSV: "", manufacturersTSV: "huawei\tHuawei\nHUAWEI\tHuawei\n"))
        XCTAssertNoThrow(try DeviceCatalog(appleTSV: "# comment\n\niPhone15,2\tiPhone 14 Pro\tphone\n", manufacturersTSV: "huawei\tHuawei\n"))
    }

    func testAppleFamilies() {
        XCTAssertEqual(DeviceCatalog.appleFamily("iPhone99,1"), .phone)
        XCTAssertEqual(DeviceCatalog.appleFamily("iPod9,1"), .phone)
        XCTAssertEqual(DeviceCatalog.appleFamily("iPad99,1"), .tablet)
        XCTAssertEqual(DeviceCatalog.appleFamily("Watch99,1"), .watch)
        XCTAssertEqual(DeviceCatalog.appleFamily("AppleTV99,1"), .tv)
        XCTAssertEqual(DeviceCatalog.appleFamily("Mac99,1"), .desktop)
        XCTAssertEqual(DeviceCatalog.appleFamily("MacBookPro99,1"), .desktop)
        XCTAssertEqual(DeviceCatalog.appleFamily("iMac99,1"), .desktop)
        for notApple in ["iPhone", "iPhone15", "iPhone15,", "iPhone,2", "iPhone15,2x", "SM-S9180", "x86_64", "arm64", "Pixel 8", "iPhone15,2 "] {
            XCTAssertNil(DeviceCatalog.appleFamily(notApple), notApple)
        }
    }

    // MARK: - each family

    func testAppleFamiliesThroughTheTable() throws {
        let h = try harness()
        let models = ["iPhone15,2", "iPad13,1", "iPod9,1", "Watch7,5", "AppleTV14,1", "Mac14,2", "MacBookPro18,3", "iMac21,1"]
        let r = try h.run([record(models.map { #"{"$model":"\#($0)","$manufacturer":"Apple","$screen_width":390,"$screen_height":844}"# })])
        XCTAssertEqual(r.enriched.map { device(props($0)) }, [
            ["Apple", "iPhone 14 Pro", "phone"],
            ["Apple", "iPad Air (4th generation)", "tablet"],
            ["Apple", "iPod touch (7th generation)", "phone"],
            ["Apple", "Apple Watch Ultra 2", "watch"],
            ["Apple", "Apple TV 4K (3rd generation)", "tv"],
            ["Apple", "MacBook Air (M2)", "desktop"],
            ["Apple", "MacBook Pro (14-inch, M1 Pro)", "desktop"],
            ["Apple", "iMac (24-inch, M1)", "desktop"],
        ])
    }

    func testUnknownAppleModelGetsFamilyTypeAndNoName() throws {
        let h = try harness()
        let r = try h.run([record([#"{"$model":"iPhone99,1","$manufacturer":"Apple"}"#, #"{"$model":"iPad99,3"}"#, #"{"$model":"Watch99,1"}"#])])
        XCTAssertEqual(r.enriched.map { device(props($0)) }, [["Apple", nil, "phone"], ["Apple", nil, "tablet"], ["Apple", nil, "watch"]])
    }

    func testAndroidManufacturerNormalisedAndTypeFromScreen() throws {
        let h = try harness()
        let r = try h.run([record([
            #"{"$model":"ELS-AN00","$manufacturer":"HUAWEI","$screen_width":1200,"$screen_height":2640}"#,
            #"{"$model":"M2012K11AC","$manufacturer":"xiaomi","$screen_width":1080,"$screen_height":2400}"#,
            #"{"$model":"2211133C","$manufacturer":"XIAOMI","$screen_width":1080,"$screen_height":2400}"#,
            #"{"$model":"ANY-AN00","$manufacturer":"HONOR","$screen_width":1080,"$screen_height":2388}"#,
            #"{"$model":"SM-X710","$manufacturer":"samsung","$screen_width":1600,"$screen_height":2560}"#,
            #"{"$model":"SM-R960","$manufacturer":"samsung","$screen_width":480,"$screen_height":480}"#,
            #"{"$model":"FP5","$manufacturer":"Fairphone","$screen_height":2340,"$screen_width":1224}"#,
            #"{"$model":"PEEM00","$manufacturer":"OPPO"}"#,
            #"{"$model":"Tab 8","$manufacturer":"Lenovo","$screen_width":800.0,"$screen_height":1280.0}"#,
        ])])
        XCTAssertEqual(r.enriched.map { device(props($0)) }, [
            ["Huawei", nil, "phone"],
            ["Xiaomi", nil, "phone"],
            ["Xiaomi", nil, "phone"],
            ["Honor", nil, "phone"],
            ["Samsung", nil, "tablet"],
            ["Samsung", nil, "watch"],
            ["Fairphone", nil, "phone"],
            ["OPPO", nil, "unknown"],
            ["Lenovo", nil, "tablet"],
        ])
        // $manufacturer is read, never changed.
        XCTAssertEqual(props(r.enriched[0])["$manufacturer"] as? String, "HUAWEI")
    }

    func testScreenRule() throws {
        let stage = try DeviceStage(config: .init(), context: StageHarness.context())
        XCTAssertEqual(stage.screenType(390, 844), .phone)       // iPhone, points
        XCTAssertEqual(stage.screenType(1080, 2400), .phone)     // Android, pixels
        XCTAssertEqual(stage.screenType(1080, 1920), .phone)     // 16:9
        XCTAssertEqual(stage.screenType(480, 800), .phone)       // small 3:5
        XCTAssertEqual(stage.screenType(820, 1180), .tablet)     // iPad, points
        XCTAssertEqual(stage.screenType(2560, 1600), .tablet)    // landscape 16:10, pixels
        XCTAssertEqual(stage.screenType(600, 1024), .tablet)     // 7-inch
        XCTAssertEqual(stage.screenType(1812, 2176), .tablet)    // unfolded foldable
        XCTAssertEqual(stage.screenType(454, 454), .watch)
        XCTAssertEqual(stage.screenType(396, 484), .watch)
        XCTAssertEqual(stage.screenType(0, 844), .unknown)
        XCTAssertEqual(stage.screenType(-1, -1), .unknown)
        var config = DeviceStage.Config()
        config.tabletMinShortSide = 700
        config.tabletMaxAspect = 1.5
        let strict = try DeviceStage(config: config, context: StageHarness.context())
        XCTAssertEqual(strict.screenType(600, 1024), .phone)
        XCTAssertEqual(strict.screenType(1600, 2560), .phone)   // 1.6
        XCTAssertEqual(strict.screenType(768, 1024), .tablet)   // 1.33
    }

    func testUnknownModelsPassThroughAsUnknown() throws {
        let h = try harness()
        let r = try h.run([record([#"{"$model":"Mystery-1"}"#, #"{"$screen_name":"Home"}"#, #"{"$model":12}"#])])
        XCTAssertEqual(r.enriched.map { device(props($0)) }, [[nil, nil, "unknown"], [nil, nil, "unknown"], [nil, nil, "unknown"]])
        XCTAssertEqual(props(r.enriched[0])["$model"] as? String, "Mystery-1")
        let stage = h.stages[1] as! DeviceStage
        XCTAssertEqual(stage.unknownCounter.value, 3)
    }

    func testProfileEventsUntouched() throws {
        let h = try harness()
        let profile = #"{"type":"profile_set","time":1763700000000,"distinct_id":"u1","properties":{"vip":true}}"#
        var rec = TestRecord(json: "[" + profile + "]")
        rec.ua = "Dalvik/2.1.0 (Linux; U; Android 13; V2227A Build/TP1A.220624.014)"
        let r = try h.run([rec])
        XCTAssertEqual(r.enriched.count, 1)
        XCTAssertEqual(props(r.enriched[0]).keys.sorted(), ["vip"])
    }

    // MARK: - never overwrite

    func testNeverOverwritesClientProperties() throws {
        let h = try harness()
        let r = try h.run([record([
            #"{"$model":"iPhone15,2","$brand":"MyBrand","$device_type":"phablet"}"#,
            #"{"$model":"iPhone15,2","$device_name":"Bob's phone"}"#,
            #"{"$model":"ELS-AN00","$manufacturer":"HUAWEI","$brand":"HUAWEI","$os":"HarmonyOS","$screen_width":1200,"$screen_height":2640}"#,
        ], ua: "ShopApp/3.2.1 (iPhone; iOS 16.7; Scale/3.00)")])
        XCTAssertEqual(device(props(r.enriched[0])), ["MyBrand", "iPhone 14 Pro", "phablet"])
        XCTAssertEqual(device(props(r.enriched[1])), ["Apple", "Bob's phone", "phone"])
        XCTAssertEqual(device(props(r.enriched[2])), ["HUAWEI", nil, "phone"])
        XCTAssertEqual(props(r.enriched[2])["$os"] as? String, "HarmonyOS")
        XCTAssertNil(props(r.enriched[2])["$os_version"], "$os present: nothing from the User-Agent")
        for e in r.enriched {
            for key in ["\"$brand\"", "\"$device_name\"", "\"$device_type\"", "\"$os\""] {
                XCTAssertLessThanOrEqual(e.raw.components(separatedBy: key).count - 1, 1, "\(key) twice in \(e.raw)")
            }
        }
    }

    func testDroppedClientValueIsReplaced() throws {
        // A client `$brand` of null is dropped by validate: enrichment then adds its own.
        let h = try harness()
        let r = try h.run([record([#"{"$model":"iPhone15,2","$brand":null}"#])])
        XCTAssertEqual(device(props(r.enriched[0])), ["Apple", "iPhone 14 Pro", "phone"])
    }

    // MARK: - User-Agent fallback

    func testOSFromUserAgentWhenMissing() throws {
        let h = try harness()
        let r = try h.run([
            record([#"{"$model":"iPhone15,2"}"#, #"{"$model":"iPhone15,2","$os":"iOS","$os_version":"17.1"}"#, #"{"$model":"iPhone15,2","$os_version":"16.7.2"}"#],
                   ua: "ShopApp/3.2.1 (iPhone; iOS 16.7; Scale/3.00)"),
            record([#"{"$model":"V2227A","$manufacturer":"vivo"}"#], ua: "Dalvik/2.1.0 (Linux; U; Android 13; V2227A Build/TP1A.220624.014)", key: "install-2"),
            record([#"{"$model":"V2227A","$manufacturer":"vivo"}"#], ua: "okhttp/4.9.0", key: "install-3"),
            record([#"{"$model":"V2227A","$manufacturer":"vivo"}"#], key: "install-4"),
            record([#"{"$model":"V2227A","$manufacturer":"vivo"}"#], ua: "curl/8.0", key: "install-5"),
        ])
        func os(_ k: Int) -> [String?] { [props(r.enriched[k])["$os"] as? String, props(r.enriched[k])["$os_version"] as? String] }
        XCTAssertEqual(os(0), ["iOS", "16.7"])
        XCTAssertEqual(os(1), ["iOS", "17.1"])
        XCTAssertEqual(os(2), ["iOS", "16.7.2"], "the client's $os_version stays")
        XCTAssertEqual(os(3), ["Android", "13"])
        XCTAssertEqual(os(4), ["Android", nil])
        XCTAssertEqual(os(5), [nil, nil], "no ua header")
        XCTAssertEqual(os(6), [nil, nil], "a User-Agent naming no OS")
        XCTAssertEqual((h.stages[1] as! DeviceStage).fromUACounter.value, 4)
    }

    func testUserAgentFallbackCanBeTurnedOff() throws {
        var config = DeviceStage.Config()
        config.userAgent = false
        let h = try harness(config)
        let r = try h.run([record([#"{"$model":"iPhone15,2"}"#], ua: "ShopApp/3.2.1 (iPhone; iOS 16.7; Scale/3.00)")])
        XCTAssertNil(props(r.enriched[0])["$os"])
        XCTAssertEqual(device(props(r.enriched[0])), ["Apple", "iPhone 14 Pro", "phone"])
    }

    // MARK: - caching across records and batches

    func testInterleavedDevicesAndBatches() throws {
        let h = try harness()
        let iphone = #"{"$model":"iPhone15,2","$screen_width":390,"$screen_height":844}"#
        let ipad = #"{"$model":"iPad13,1","$screen_width":820,"$screen_height":1180}"#
        let huaweiPhone = #"{"$model":"ELS-AN00","$manufacturer":"HUAWEI","$screen_width":1200,"$screen_height":2640}"#
        let huaweiTablet = #"{"$model":"ELS-AN00","$manufacturer":"HUAWEI","$screen_width":1600,"$screen_height":2560}"#
        let oddBrand = #"{"$model":"X1","$manufacturer":"Acme \"Labs\""}"#
        let records = [
            record([iphone, iphone, ipad], key: "a"), record([huaweiPhone, huaweiTablet, huaweiPhone], key: "b"),
            record([oddBrand, oddBrand, iphone], key: "c"), record([ipad, huaweiPhone], key: "d"),
        ]
        let expected: [[String?]] = [
            ["Apple", "iPhone 14 Pro", "phone"], ["Apple", "iPhone 14 Pro", "phone"], ["Apple", "iPad Air (4th generation)", "tablet"],
            ["Huawei", nil, "phone"], ["Huawei", nil, "tablet"], ["Huawei", nil, "phone"],
            ["Acme \"Labs\"", nil, "unknown"], ["Acme \"Labs\"", nil, "unknown"], ["Apple", "iPhone 14 Pro", "phone"],
            ["Apple", "iPad Air (4th generation)", "tablet"], ["Huawei", nil, "phone"],
        ]
        for _ in 0..<3 {  // the same stage over several batches: fragments are rewritten into each batch's scratch arena
            let r = try h.run(records)
            XCTAssertEqual(r.enriched.map { device(props($0)) }, expected)
        }
    }

    // MARK: - configuration

    func testConfigErrors() throws {
        func check(_ keys: String) throws -> String? {
            let spec = try PipelineSpec.parse(yaml: "stages:\n  - kind: device\n" + keys, file: "p.yaml")
            do {
                _ = try PipelineEngine(spec: spec, registry: BuiltinStages.registry, logger: Logger(label: "test"))
                return nil
            } catch {
                return "\(error)"
            }
        }
        XCTAssertNil(try check("    tablet_min_short_side: 600\n    tablet_max_aspect: 1.75\n    user_agent: true\n"))
        XCTAssertEqual(try check("    tablet_max_aspect: 1\n"), "p.yaml:3:24: tablet_max_aspect must be more than 1 and at most 10 (e.g. 1.75)")
        XCTAssertEqual(try check("    tablet_min_short_side: 0\n"), "p.yaml:3:28: tablet_min_short_side must be at least 1 (e.g. 600)")
        XCTAssertEqual(try check("    user_agnet: false\n"), "p.yaml:3:5: unknown key 'user_agnet' (did you mean 'user_agent'?)")
    }
}
