// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "maidian",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "maidian", targets: ["maidian"]),
        .library(name: "MaidianPipeline", targets: ["MaidianPipeline"]),
        .library(name: "MaidianStages", targets: ["MaidianStages"]),
        // For custom builds (examples/custom-stage): the CLI with extra stages, and the batch API stages use.
        .library(name: "MaidianCLI", targets: ["MaidianCLI"]),
        .library(name: "MaidianEvents", targets: ["MaidianEvents"]),
        .library(name: "MaidianRules", targets: ["MaidianRules"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // C libraries stay at the edge: one system-library target each, one Swift importer each.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "CMaxMindDB", pkgConfig: "libmaxminddb", providers: [.apt(["libmaxminddb-dev"])]),

        .target(
            name: "MaidianKafka",
            dependencies: ["CRdKafka", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "MaidianEvents",
            dependencies: ["CZstd"]
        ),
        .target(
            name: "MaidianGeo",
            dependencies: ["CMaxMindDB"]
        ),
        .target(
            name: "MaidianRecording",
            dependencies: ["MaidianEvents"]
        ),
        .target(
            name: "MaidianPipeline",
            dependencies: [
                "MaidianEvents",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "MaidianRules",
            dependencies: ["MaidianPipeline", "MaidianEvents"]
        ),
        .target(
            name: "MaidianStages",
            dependencies: ["MaidianPipeline", "MaidianEvents", "MaidianGeo", "MaidianRules", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "MaidianRuntime",
            dependencies: [
                "MaidianKafka", "MaidianEvents", "MaidianRecording", "MaidianPipeline",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The commands, as a library a team's own executable reuses with extra stages.
        .target(
            name: "MaidianCLI",
            dependencies: [
                "MaidianKafka", "MaidianEvents", "MaidianRecording", "MaidianPipeline", "MaidianStages", "MaidianRuntime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "maidian",
            dependencies: ["MaidianCLI", "MaidianStages"]
        ),

        .testTarget(name: "MaidianKafkaTests", dependencies: ["MaidianKafka"]),
        .testTarget(name: "MaidianEventsTests", dependencies: ["MaidianEvents"]),
        .testTarget(name: "MaidianGeoTests", dependencies: ["MaidianGeo"]),
        .testTarget(name: "MaidianPipelineTests", dependencies: ["MaidianPipeline", "MaidianStages", "MaidianEvents"]),
        .testTarget(name: "MaidianStagesTests", dependencies: ["MaidianStages", "MaidianPipeline", "MaidianEvents"]),
        .testTarget(name: "MaidianRulesTests", dependencies: ["MaidianRules", "MaidianPipeline"]),
        .testTarget(name: "MaidianRecordingTests", dependencies: ["MaidianRecording", "MaidianEvents"]),
        .testTarget(name: "MaidianRuntimeTests", dependencies: ["MaidianRuntime", "MaidianStages", "MaidianPipeline", "MaidianEvents", "MaidianKafka", "MaidianRecording"]),
        .testTarget(name: "MaidianIntegrationTests", dependencies: ["MaidianKafka", "MaidianRuntime", "MaidianRecording"]),
    ],
    swiftLanguageModes: [.v6]
)
