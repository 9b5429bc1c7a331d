// swift-tools-version: 6.1
// libFuzzer targets for what untrusted bytes reach (issue 13): a record's value and headers through decoding
// and every event stage of the sample pipeline, the pipeline loader, the rules loader and the internal topic's
// records through the merger. A package of its
// own so that a plain `swift build` at the root is unaffected. Build and run with `make fuzz` (see README.md).
import PackageDescription

// No `main`: libFuzzer's (`-sanitize=fuzzer`) calls `LLVMFuzzerTestOneInput`.
let fuzz: [SwiftSetting] = [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "maidian-fuzz",
    dependencies: [
        .package(name: "maidian", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "MaidianPipeline", package: "maidian"),
                .product(name: "MaidianStages", package: "maidian"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "FuzzRecord",
            dependencies: [
                "FuzzSupport",
                .product(name: "MaidianEvents", package: "maidian"),
                .product(name: "MaidianPipeline", package: "maidian"),
                .product(name: "MaidianStages", package: "maidian"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: fuzz),
        .executableTarget(
            name: "FuzzPipeline",
            dependencies: ["FuzzSupport", .product(name: "MaidianPipeline", package: "maidian")],
            swiftSettings: fuzz),
        .executableTarget(
            name: "FuzzInternal",
            dependencies: [
                "FuzzSupport",
                .product(name: "MaidianEvents", package: "maidian"),
                .product(name: "MaidianPipeline", package: "maidian"),
            ],
            swiftSettings: fuzz),
        .executableTarget(
            name: "FuzzRules",
            dependencies: ["FuzzSupport", .product(name: "MaidianRules", package: "maidian")],
            swiftSettings: fuzz),
    ]
)
