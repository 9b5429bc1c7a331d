// swift-tools-version: 6.1
// A team's own Maidian build: every built-in command and stage, plus the team's stages.
// It depends on Maidian by path here; a team outside this repo uses
// `.package(url: "https://…/maidian.git", from: "…")` instead, and names the package by that URL's last
// path component.
import PackageDescription

let package = Package(
    name: "maidian-team",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "maidian-team", targets: ["maidian-team"]),
    ],
    dependencies: [
        .package(name: "maidian", path: "../.."),
    ],
    targets: [
        // The team's stages: one file per stage.
        .target(
            name: "TeamStages",
            dependencies: [
                .product(name: "MaidianPipeline", package: "maidian"),
                .product(name: "MaidianEvents", package: "maidian"),
            ]
        ),
        // The executable: the built-in stages plus the team's, and Maidian's whole command line.
        .executableTarget(
            name: "maidian-team",
            dependencies: [
                "TeamStages",
                .product(name: "MaidianCLI", package: "maidian"),
                .product(name: "MaidianStages", package: "maidian"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
