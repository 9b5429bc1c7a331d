import XCTest
@testable import MaidianStages

final class UserAgentTests: XCTestCase {
    private func check(_ ua: String, _ name: UserAgentOS.Name?, _ version: String?, file: StaticString = #filePath, line: UInt = #line) {
        let os = UserAgent.os(ua)
        XCTAssertEqual(os?.name, name, ua, file: file, line: line)
        XCTAssertEqual(os?.version, version, ua, file: file, line: line)
    }

    func testIOSApps() {
        check("ShopApp/3.2.1 (iPhone; iOS 16.7; Scale/3.00)", .iOS, "16.7")
        check("ShopApp/4.0.0 (iPad; iOS 17.4; Scale/2.00)", .iOS, "17.4")
        check("Shop/3.2.1 (iPad; iPadOS 17.0; Scale/2.00)", .iOS, "17.0")
        check("MyApp/1.0 iOS/18.1 (iPhone15,2)", .iOS, "18.1")
        check("ShopApp-iOS/3.2.1 (iPhone; iOS 16.7.2; Scale/3.00)", .iOS, "16.7.2")
    }

    func testIOSWebViews() {
        check("Mozilla/5.0 (iPhone; CPU iPhone OS 16_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148", .iOS, "16.7")
        check("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1", .iOS, "17.4.1")
        check("Mozilla/5.0 (iPad; CPU OS 16_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148", .iOS, "16.6")
    }

    func testCFNetworkDarwin() {
        check("ShopApp/3.2.1 CFNetwork/1410.0.3 Darwin/22.6.0", .iOS, "16.6")
        check("ShopApp/3.2.1 CFNetwork/1494.0.7 Darwin/23.4.0", .iOS, "17.4")
        check("ShopApp/3.2.1 CFNetwork/1568.100.1 Darwin/24.0.0", .iOS, "18.0")
        check("ShopApp/3.2.1 CFNetwork/3826.400.120 Darwin/25.1.0", .iOS, "26.1")
        check("ShopApp/1.0 CFNetwork/1209 Darwin/20.2.0", .iOS, "14")
        check("ShopApp/1.0 CFNetwork/1.0 Darwin/9.0.0", .iOS, nil)
        check("ShopApp/1.0 CFNetwork/1410.0.3", .iOS, nil)
    }

    func testAndroid() {
        check("Dalvik/2.1.0 (Linux; U; Android 13; V2227A Build/TP1A.220624.014)", .android, "13")
        check("Dalvik/2.1.0 (Linux; U; Android 8.1.0; Redmi 6 MIUI/V10.2.2.0.OCGCNXM)", .android, "8.1.0")
        check("Mozilla/5.0 (Linux; Android 14; SM-S9180 Build/UP1A.231005.007; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/120.0.6099.230 Mobile Safari/537.36", .android, "14")
        check("Shop/3.2.1 (Android 12; HUAWEI NOH-AL00)", .android, "12")
        check("okhttp/4.9.0", .android, nil)
        check("OkHttp/3.12.1", .android, nil)
        check("Dalvik/2.1.0 (Linux; U)", .android, nil)
    }

    func testHarmonyOS() {
        check("Mozilla/5.0 (Phone; OpenHarmony 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/114.0.0.0 Safari/537.36 ArkWeb/4.1.6.1 Mobile", .harmonyOS, "5.0")
        check("Shop/3.2.1 (HUAWEI; HarmonyOS 4.2.0)", .harmonyOS, "4.2.0")
    }

    func testMacOS() {
        check("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", .macOS, "10.15.7")
        check("Mozilla/5.0 (Macintosh) Something", .macOS, nil)
    }

    func testAppleDeviceWithoutVersion() {
        check("ShopApp/3.2.1 (iPhone; Scale/3.00)", .iOS, nil)
    }

    func testNothingKnown() {
        check("", nil, nil)
        check("curl/8.4.0", nil, nil)
        check("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36", nil, nil)
        check("python-requests/2.31", nil, nil)
        check("Androidish/1.0", nil, nil)
    }

    func testVersionEdges() {
        check("App (iPhone; iOS 16.)", .iOS, "16")
        check("App (iPhone; iOS x)", .iOS, nil)
        check("App (Linux; Android 99999999999999999999999999)", .android, "99999999999999999999")
    }
}
