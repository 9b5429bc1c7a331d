import MaidianEvents
import MaidianPipeline

/// The windows stage's constants, derived once from its `Config` and the pipeline's roles: window lengths and
/// times in milliseconds, the dims layout and the role lookup. A value: every part reads it, none changes it.
struct WindowsSettings {
    /// Every size's window length, the first first.
    let windows: [Int64]
    /// Progress goes out once per this much watermark: the smallest size, whose windows it completes first.
    let progressEvery: Int64
    let lateness: Int64
    let allowedLateness: Int64
    let visitTimeout: Int64
    let trailMaxAge: Int64
    let trailLength: Int
    /// Dims names in output order (sorted), with the slot where `content=` goes.
    let dimNames: [[UInt8]]
    let contentSlot: Int
    /// Index in `dimNames` of `app_version` (read from `lib` when properties lack it), or -1.
    let appVersionSlot: Int
    /// `PropertyFinder` bits of the `by` properties.
    let dimsWanted: UInt64
    /// The role names, in role order (a name listed twice is found under its first role, as a scan in role
    /// order would find it), and per member number its role and interned event name.
    let roleNames: TextSet
    let roleOfName: [(role: Int, event: Int32)]

    /// Property slots of the stage's `PropertyFinder`: 0 $screen_name, 1 current_url, 2 $app_version,
    /// 3 $element_path, 4 $element_type, 5 $element_position, 6 $element_index, 7 $element_content, then the
    /// `by` properties (`finderNames`).
    static let fixedProperties = ["$screen_name", "current_url", "$app_version", "$element_path", "$element_type",
                                  "$element_position", "$element_index", "$element_content"]

    /// The names the stage's `PropertyFinder` looks for, in slot order.
    let finderNames: [String]

    /// Derives the constants; the role event names are interned into `eventNames` (the catalog's).
    init(config: WindowsStage.Config, roles r: EventRoles, eventNames names: inout Interner) {
        windows = config.sizes.map(\.window.milliseconds)
        progressEvery = windows.min()!
        lateness = config.lateness.milliseconds
        allowedLateness = config.allowedLateness.milliseconds
        visitTimeout = config.visitTimeout.milliseconds
        trailMaxAge = config.trailMaxAge.milliseconds
        trailLength = config.trailLength
        var dims = config.by.sorted()
        contentSlot = dims.firstIndex { $0 > "content" } ?? dims.count
        dims.insert("content", at: contentSlot)
        dimNames = dims.map { Array($0.utf8) }
        appVersionSlot = dims.firstIndex(of: "app_version") ?? -1
        let fixed = Self.fixedProperties
        finderNames = fixed + config.by.sorted().map { $0 == "app_version" ? "$app_version" : $0 }
        var dimsBits: UInt64 = 0
        for n in fixed.count..<(fixed.count + config.by.count) where n < 64 { dimsBits |= 1 << UInt64(n) }
        dimsWanted = dimsBits
        let roleLists = [r.pageEnter, r.pageLeave, r.click, r.appStart, r.appEnd, r.crash]
        let roleEventIDs = roleLists.map { $0.map { names.intern(Array($0.utf8)) } }
        var members: [String] = []
        var ofName: [(role: Int, event: Int32)] = []
        for (role, list) in roleLists.enumerated() {
            for (i, name) in list.enumerated() {
                members.append(name)
                ofName.append((role, roleEventIDs[role][i]))
            }
        }
        roleNames = TextSet(members)
        roleOfName = ofName
    }
}
