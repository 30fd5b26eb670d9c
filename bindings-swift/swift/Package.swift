// swift-tools-version:5.9
// The Swift binding of ambit. `scripts/test-swift.sh` generates the UniFFI sources (Sources/AmbitFFI,
// Sources/Ambit/ambit_swift.swift) and puts the host-built libambit_swift.so in .artifacts/lib.
import PackageDescription

let libDir = Context.packageDirectory + "/.artifacts/lib"

let package = Package(
    name: "Ambit",
    products: [
        .library(name: "Ambit", targets: ["Ambit"]),
        .executable(name: "AmbitWeather", targets: ["AmbitWeather"]),
    ],
    targets: [
        // The generated C header and module map of the Rust library (module `ambit_swiftFFI`).
        .systemLibrary(name: "AmbitFFI", path: "Sources/AmbitFFI"),
        .target(
            name: "Ambit",
            dependencies: ["AmbitFFI"],
            path: "Sources/Ambit",
            linkerSettings: [
                .linkedLibrary("ambit_swift"),
                .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir]),
            ]
        ),
        // examples/swift/main.swift, copied in by scripts/test-swift.sh.
        .executableTarget(name: "AmbitWeather", dependencies: ["Ambit"], path: "Sources/AmbitWeather"),
        .testTarget(name: "AmbitTests", dependencies: ["Ambit"], path: "Tests/AmbitTests"),
    ]
)
