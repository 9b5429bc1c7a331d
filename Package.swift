// swift-tools-version: 6.1
import PackageDescription

/// Release builds of the per-event modules skip Swift's dynamic exclusivity checks (each access to a class's
/// stored array otherwise pays a runtime check); debug builds, which the tests run, keep them.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

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
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),  // LogEvent (JSON log lines)
        .package(url: "https://github.com/jpsim/Yams", from: "5.0.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Serves /metrics and /health; default traits off (no swift-configuration support needed).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ],
    targets: [
        // C libraries stay at the edge: one system-library target each, one Swift importer each.
        .systemLibrary(name: "CRdKafka", pkgConfig: "rdkafka", providers: [.apt(["librdkafka-dev"])]),
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "CMaxMindDB", pkgConfig: "libmaxminddb", providers: [.apt(["libmaxminddb-dev"])]),
        // Multi-pattern regex scan for `identifier_regex` rules (Vectorscan provides the same `libhs`).
        .systemLibrary(name: "CHyperscan", pkgConfig: "libhs", providers: [.apt(["libhyperscan-dev"]), .brew(["vectorscan"])]),
        // A prefetch hint for the match stage's per-event loop (a header, no library): MaidianEvents imports it.
        .systemLibrary(name: "CPrefetch"),

        .target(
            name: "MaidianKafka",
            dependencies: ["CRdKafka", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "MaidianEvents",
            dependencies: ["CZstd", "CPrefetch"],
            swiftSettings: hotPath
        ),
        .target(
            name: "MaidianGeo",
            dependencies: ["CMaxMindDB"]
        ),
        .target(
            name: "MaidianRecording",
            dependencies: ["MaidianEvents"]
        ),
        // YAML with positions: documents, `${VAR}` substitution, the located decoder, durations and sizes,
        // declared settings. What pipeline files and rules files share (MaidianPipeline re-exports it).
        .target(
            name: "MaidianConfig",
            dependencies: ["MaidianEvents", .product(name: "Yams", package: "Yams")]
        ),
        .target(
            name: "MaidianPipeline",
            dependencies: [
                "MaidianConfig", "MaidianEvents",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: hotPath
        ),
        .target(
            name: "MaidianRules",
            dependencies: ["MaidianConfig", "MaidianEvents", "CHyperscan"],
            swiftSettings: hotPath
        ),
        .target(
            name: "MaidianStages",
            dependencies: ["MaidianPipeline", "MaidianEvents", "MaidianGeo", "MaidianRules", .product(name: "Logging", package: "swift-log")],
            swiftSettings: hotPath
        ),
        .target(
            name: "MaidianRuntime",
            dependencies: [
                "MaidianKafka", "MaidianEvents", "MaidianRecording", "MaidianPipeline",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Tools that run pipelines offline or generate inputs (`bench`, `test`, `rules test|compare|doctor`, `gen`,
        // `bench-match`): the worker's libraries above do not depend on this module; only the CLI links it.
        .target(
            name: "MaidianTools",
            dependencies: [
                "MaidianEvents", "MaidianRecording", "MaidianPipeline", "MaidianRules", "MaidianStages",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The commands, as a library a team's own executable reuses with extra stages.
        .target(
            name: "MaidianCLI",
            dependencies: [
                "MaidianKafka", "MaidianEvents", "MaidianRecording", "MaidianPipeline", "MaidianStages", "MaidianRules", "MaidianRuntime", "MaidianTools",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .executableTarget(
            name: "maidian",
            dependencies: ["MaidianCLI", "MaidianStages"]
        ),
        // Windows-stage state per open visit (bench/README.md); mallinfo2 through a C shim.
        .target(name: "CHeapStats", path: "bench/state-size/CHeapStats"),
        .executableTarget(
            name: "maidian-state-size",
            dependencies: ["CHeapStats", "MaidianStages", "MaidianPipeline", "MaidianEvents", .product(name: "Logging", package: "swift-log")],
            path: "bench/state-size/Sources"
        ),

        .testTarget(name: "MaidianKafkaTests", dependencies: ["MaidianKafka"]),
        .testTarget(name: "MaidianEventsTests", dependencies: ["MaidianEvents"]),
        .testTarget(name: "MaidianGeoTests", dependencies: ["MaidianGeo"]),
        .testTarget(name: "MaidianPipelineTests", dependencies: ["MaidianPipeline", "MaidianStages", "MaidianEvents"]),
        .testTarget(name: "MaidianStagesTests", dependencies: ["MaidianStages", "MaidianPipeline", "MaidianEvents", "MaidianRecording", "MaidianTools"]),
        .testTarget(name: "MaidianRulesTests", dependencies: ["MaidianRules", "MaidianPipeline", "MaidianEvents", "MaidianRecording", "MaidianTools"]),
        .testTarget(name: "MaidianRecordingTests", dependencies: ["MaidianRecording", "MaidianEvents"]),
        .testTarget(name: "MaidianRuntimeTests", dependencies: [
            "MaidianRuntime", "MaidianStages", "MaidianPipeline", "MaidianEvents", "MaidianKafka", "MaidianRecording", "MaidianTools",
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .testTarget(name: "MaidianToolsTests", dependencies: ["MaidianTools", "MaidianRules", "MaidianStages", "MaidianPipeline", "MaidianEvents", "MaidianRecording"]),
        .testTarget(name: "MaidianIntegrationTests", dependencies: ["MaidianKafka", "MaidianRuntime", "MaidianTools", "MaidianRecording", "MaidianStages", "MaidianPipeline"]),
    ],
    swiftLanguageModes: [.v6]
)
