// The simulated shopping app, modelled on the recorded sample traffic (shared/traffic/sample.ndjson):
// its view controllers, page paths, elements, devices, versions and client IP ranges.

import MaidianRecording

/// How a click was captured (wire format §3 `$element_kind`).
enum ElementKind: UInt8 {
    case control, gesture, table, collection, alert
}

/// One clickable element of a page.
struct ElementSpec {
    let kind: ElementKind
    let weight: Double
    /// For control/gesture/alert: the JSON properties after `$screen_name`, each with a leading comma.
    let fragment: [UInt8]
    /// Tapping it often crashes the app (the debug menu's crash button).
    let crashes: Bool
    /// Tapping it opens an alert (logout confirmation).
    let opensAlert: Bool
}

/// One page (view controller).
struct PageSpec {
    let screen: [UInt8]
    let title: [UInt8]
    let pagePath: [UInt8]
    /// Clicks per visit are uniform in 0...maxClicks.
    let maxClicks: Int
    let elements: [ElementSpec]
    let elementWeights: [Double]
    let next: [Int]
    let nextWeights: [Double]
    /// For table cells: the prefix up to `"$element_position":"` and the target fragment.
    let tableTarget: [UInt8]
}

/// A device model.
struct DeviceSpec {
    let manufacturer: String
    let model: String
    let width: Int
    let height: Int
    let android: Bool
    let tablet: Bool
    let weight: Double
}

enum TrafficCatalog {
    static let viewPath = "UIWindow-UITransitionView-UIDropShadowView-UILayoutContainerView-UITransitionView-UIViewControllerWrapperView-UILayoutContainerView-UINavigationTransitionView-UIViewControllerWrapperView-UIView"
    static let tablePath = viewPath + "-UITableView"
    static let collectionPath = viewPath + "-UICollectionView"
    static let alertPath = "UIWindow-UITransitionView-_UIAlertControllerView-UIView"

    /// Cell titles: row r of section s shows `cellTitles[(r + 7 s) % 10]` (as in the sample).
    static let cellTitles = ["Sale", "New arrivals", "Phones", "Laptops", "Shoes", "Books", "Coffee", "Toys", "Garden", "Watches"]
    static let cellTitleBytes: [[UInt8]] = cellTitles.map { Array($0.utf8) }
    /// Hot search words in the search page's collection view (some non-ASCII on purpose).
    static let hotWords = ["iPhone case", "running shoes", "coffee beans", "headphones", "手机壳", "yoga mat", "backpack", "智能手表"]

    enum Page {
        static let home = 0, productList = 1, product = 2, search = 3, cart = 4, orderList = 5, profile = 6, debugMenu = 7
    }

    static func control(_ vc: String, _ index: Int, _ content: String, _ action: String, tag: Int = 0, weight: Double,
                        crashes: Bool = false, opensAlert: Bool = false) -> ElementSpec {
        var f: [UInt8] = []
        f.append(utf8: ",\"$element_path\":\"\(viewPath)\",\"$element_type\":\"UIButton\",\"$element_index\":\(index),\"$element_content\":")
        JSONText.appendQuoted(content, to: &f)
        f.append(utf8: ",\"$element_kind\":\"control\",\"$element_target\":\"\(vc)\",\"$element_action\":\"\(action)\",\"$element_tag\":\(tag)")
        return ElementSpec(kind: .control, weight: weight, fragment: f, crashes: crashes, opensAlert: opensAlert)
    }

    static func gesture(_ vc: String, _ action: String, weight: Double) -> ElementSpec {
        let f = Array(",\"$element_path\":\"\(viewPath)\",\"$element_type\":\"UIImageView\",\"$element_index\":0,\"$element_kind\":\"gesture\",\"$element_target\":\"\(vc)\",\"$element_action\":\"\(action)\"".utf8)
        return ElementSpec(kind: .gesture, weight: weight, fragment: f, crashes: false, opensAlert: false)
    }

    static func table(weight: Double) -> ElementSpec {
        ElementSpec(kind: .table, weight: weight, fragment: [], crashes: false, opensAlert: false)
    }

    static func collection(weight: Double) -> ElementSpec {
        ElementSpec(kind: .collection, weight: weight, fragment: [], crashes: false, opensAlert: false)
    }

    /// The two buttons of the logout confirmation alert.
    static let alertButtons: [[UInt8]] = ["Cancel", "Log out"].enumerated().map { i, title in
        Array(",\"$element_path\":\"\(alertPath)\",\"$element_type\":\"UIAlertController\",\"$element_index\":\(i),\"$element_content\":\"\(title)\",\"$element_kind\":\"alert\"".utf8)
    }

    static func page(_ screen: String, _ title: String, nav: Int, index: Int, maxClicks: Int,
                     elements: [ElementSpec], next: [(Int, Double)]) -> PageSpec {
        PageSpec(
            screen: Array(screen.utf8), title: Array(title.utf8),
            pagePath: Array("UITabBarController-UINavigationController(\(nav))-\(screen)(\(index))".utf8),
            maxClicks: maxClicks, elements: elements, elementWeights: elements.map(\.weight),
            next: next.map(\.0), nextWeights: next.map(\.1),
            tableTarget: Array(screen.utf8))
    }

    /// Pages, elements and navigation weights (measured on the sample).
    static let pages: [PageSpec] = {
        typealias P = Page
        return [
            page("HomeViewController", "Home", nav: 0, index: 0, maxClicks: 5, elements: [
                table(weight: 0.5),
                control("HomeViewController", 0, "Search", "searchTapped:", weight: 0.125),
                control("HomeViewController", 1, "Scan", "scanTapped:", weight: 0.125),
                control("HomeViewController", 2, "Messages", "messagesTapped:", weight: 0.125),
                gesture("HomeViewController", "bannerTapped:", weight: 0.125),
            ], next: [(P.cart, 255), (P.productList, 265), (P.product, 248), (P.profile, 209), (P.search, 223)]),
            page("ProductListViewController", "ProductList", nav: 0, index: 1, maxClicks: 4, elements: [
                table(weight: 0.47),
                control("ProductListViewController", 0, "Filter", "filterTapped:", weight: 0.27),
                control("ProductListViewController", 1, "Sort", "sortTapped:", weight: 0.26),
            ], next: [(P.cart, 152), (P.home, 187), (P.product, 113)]),
            page("ProductViewController", "Product", nav: 0, index: 2, maxClicks: 5, elements: [
                gesture("ProductViewController", "imageTapped:", weight: 0.47),
                control("ProductViewController", 0, "Add to cart", "addtocartTapped:", weight: 0.135),
                control("ProductViewController", 1, "Buy now", "buynowTapped:", weight: 0.135),
                control("ProductViewController", 2, "Share", "shareTapped:", weight: 0.13),
                control("ProductViewController", 3, "Favorite", "favoriteTapped:", weight: 0.13),
            ], next: [(P.cart, 139), (P.home, 166), (P.productList, 140), (P.search, 4)]),
            page("SearchViewController", "Search", nav: 0, index: 1, maxClicks: 4, elements: [
                table(weight: 0.4),
                control("SearchViewController", 0, "Cancel", "cancelTapped:", weight: 0.4),
                collection(weight: 0.2),
            ], next: [(P.home, 129), (P.productList, 83)]),
            page("CartViewController", "Cart", nav: 1, index: 0, maxClicks: 4, elements: [
                table(weight: 0.5),
                control("CartViewController", 0, "Checkout", "checkoutTapped:", weight: 0.25),
                control("CartViewController", 1, "Edit", "editTapped:", weight: 0.25),
            ], next: [(P.home, 209), (P.orderList, 161), (P.product, 136)]),
            page("OrderListViewController", "OrderList", nav: 2, index: 0, maxClicks: 4, elements: [
                table(weight: 0.5),
                control("OrderListViewController", 0, "All", "allTapped:", tag: 1, weight: 0.17),
                control("OrderListViewController", 1, "Unpaid", "unpaidTapped:", tag: 2, weight: 0.17),
                control("OrderListViewController", 2, "Shipped", "shippedTapped:", tag: 3, weight: 0.16),
            ], next: [(P.home, 137), (P.profile, 89)]),
            page("ProfileViewController", "Profile", nav: 3, index: 0, maxClicks: 5, elements: [
                gesture("ProfileViewController", "avatarTapped:", weight: 0.55),
                control("ProfileViewController", 0, "Settings", "settingsTapped:", weight: 0.15),
                control("ProfileViewController", 1, "Coupons", "couponsTapped:", weight: 0.15),
                control("ProfileViewController", 2, "Logout", "logoutTapped:", weight: 0.15, opensAlert: true),
            ], next: [(P.debugMenu, 107), (P.home, 149), (P.orderList, 98)]),
            page("DebugMenuViewController", "DebugMenu", nav: 3, index: 1, maxClicks: 3, elements: [
                control("DebugMenuViewController", 0, "Crash", "crashTapped:", weight: 0.5, crashes: true),
                control("DebugMenuViewController", 1, "Reset", "resetTapped:", weight: 0.5),
            ], next: [(P.profile, 85), (P.home, 8)]),
        ]
    }()

    static let devices: [DeviceSpec] = [
        DeviceSpec(manufacturer: "Apple", model: "iPhone12,1", width: 414, height: 896, android: false, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Apple", model: "iPhone13,2", width: 390, height: 844, android: false, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Apple", model: "iPhone14,5", width: 390, height: 844, android: false, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Apple", model: "iPhone14,7", width: 390, height: 844, android: false, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Apple", model: "iPhone15,2", width: 390, height: 844, android: false, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Apple", model: "iPhone16,1", width: 393, height: 852, android: false, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Apple", model: "iPad11,6", width: 810, height: 1080, android: false, tablet: true, weight: 0.9),
        DeviceSpec(manufacturer: "Apple", model: "iPad13,1", width: 820, height: 1180, android: false, tablet: true, weight: 1),
        DeviceSpec(manufacturer: "HUAWEI", model: "ELS-AN00", width: 1200, height: 2640, android: true, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "HUAWEI", model: "NOH-AL00", width: 1344, height: 2772, android: true, tablet: false, weight: 0.8),
        DeviceSpec(manufacturer: "HONOR", model: "ANY-AN00", width: 1080, height: 2388, android: true, tablet: false, weight: 0.6),
        DeviceSpec(manufacturer: "xiaomi", model: "M2012K11AC", width: 1080, height: 2400, android: true, tablet: false, weight: 1),
        DeviceSpec(manufacturer: "Xiaomi", model: "2211133C", width: 1080, height: 2400, android: true, tablet: false, weight: 0.8),
        DeviceSpec(manufacturer: "OPPO", model: "PEEM00", width: 1440, height: 3216, android: true, tablet: false, weight: 0.7),
        DeviceSpec(manufacturer: "vivo", model: "V2227A", width: 1080, height: 2400, android: true, tablet: false, weight: 0.7),
        DeviceSpec(manufacturer: "samsung", model: "SM-S9180", width: 1440, height: 3088, android: true, tablet: false, weight: 0.5),
    ]
    static let iosDevices: [Int] = devices.indices.filter { !devices[$0].android }
    static let androidDevices: [Int] = devices.indices.filter { devices[$0].android }

    static let iosVersions = ["16.7", "17.1", "17.4", "18.0", "18.1"]
    static let iosVersionWeights = [0.27, 0.23, 0.26, 0.2, 0.04]
    static let androidVersions = ["11", "12", "13", "14"]
    static let androidVersionWeights = [0.15, 0.25, 0.35, 0.25]

    /// App versions, oldest first (a user may upgrade to the next one between sessions).
    static let appVersions = ["3.1.0", "3.1.2", "3.2.0", "3.2.1", "4.0.0"]
    static let appVersionWeights = [0.05, 0.04, 0.2, 0.4, 0.31]
    static let iosLibVersion = "4.5.0"
    static let androidLibVersion = "6.7.2"

    static let networks: [[UInt8]] = ["WIFI", "5G", "4G"].map { Array($0.utf8) }

    /// Client IP ranges of the sample (they resolve in the test GeoIP database; 10.x is private).
    /// `#` is replaced by a random number 1...254.
    static let ipPatterns = [
        "1.0.1.#", "8.8.8.#", "10.1.#.#", "2001:da8::#:#", "113.108.#.#", "119.123.#.#",
        "125.70.#.#", "183.128.#.#", "221.226.#.#", "36.110.#.#", "58.246.#.#", "61.135.#.#",
    ]

    /// A very long property value (more than 8191 UTF-8 bytes, mixing 1- and 3-byte characters so a cut
    /// at 8191 bytes falls inside a character).
    static let longText: [UInt8] = {
        var s: [UInt8] = []
        while s.count < 9000 { s.append(utf8: "ab数据") }
        return s
    }()

    static func iosCrashReason(_ rng: inout SeededRandom, page: String) -> String {
        switch rng.below(5) {
        case 0:
            return "EXC_BAD_ACCESS " + String(repeating: "x", count: 10 + rng.below(190))
        case 1:
            return "EXC_BAD_ACCESS (SIGSEGV)\nKERN_INVALID_ADDRESS at 0x0000000000000010\nThread 0 Crashed:\n0   libobjc.A.dylib   objc_msgSend + 16\n1   ShopApp   -[\(page) viewDidLoad] + 212"
        case 2:
            return "NSInvalidArgumentException: -[__NSCFNumber length]: unrecognized selector sent to instance 0x8c3e1f2a"
        case 3:
            let n = 1 + rng.below(20)
            return "NSRangeException: *** -[__NSArrayM objectAtIndexedSubscript:]: index \(n) beyond bounds [0 .. \(n - 1)]"
        default:
            return "EXC_CRASH (SIGABRT): \"Fatal error: Unexpectedly found nil while unwrapping an Optional value\" in \(page).swift"
        }
    }

    static func androidCrashReason(_ rng: inout SeededRandom, page: String) -> String {
        let activity = page.replacingSuffix("ViewController", with: "Activity")
        switch rng.below(3) {
        case 0:
            return "java.lang.NullPointerException: Attempt to invoke virtual method 'int java.lang.String.length()' on a null object reference\n\tat com.shop.app.ui.\(activity).onResume(\(activity).java:88)"
        case 1:
            let n = 1 + rng.below(20)
            return "java.lang.IndexOutOfBoundsException: Index: \(n), Size: \(n)\n\tat java.util.ArrayList.get(ArrayList.java:437)"
        default:
            return "java.lang.IllegalStateException: Fragment not attached to a context.\n\tat com.shop.app.ui.\(activity)$Fragment.requireContext(Fragment.java:972)"
        }
    }
}

extension String {
    fileprivate func replacingSuffix(_ suffix: String, with other: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) + other : self
    }
}
