// swift-tools-version:5.9
// The Swift package of ambit, at the repository's root where SwiftPM looks for it:
//
//     .package(url: "https://github.com/<owner>/ambit.git", branch: "main"),   // product "Ambit"
//
// Its sources are bindings-swift/swift/Sources: the wrapper, and the UniFFI-generated Swift and C header,
// committed (scripts/test-swift.sh regenerates them and fails when they differ from what is committed).
// Nothing here uses `unsafeFlags`, so SwiftPM accepts it as a dependency by URL.
//
// The compiled core, the Rust library `ambit_swift`, comes from:
// - Apple platforms, after a release: the release's XCFramework (`ambitRelease` below: its URL and
//   checksum, written on the release tag by .github/workflows/release.yml, which builds it with
//   bindings-swift/scripts/build-xcframework.sh). `AMBIT_SWIFT_XCFRAMEWORK=1` uses one built locally
//   by that script instead (bindings-swift/swift/.artifacts/ambit_swiftFFI.xcframework).
// - Linux, and Apple before the first release: the library built from this checkout and found through
//   pkg-config: `bash bindings-swift/scripts/build-lib.sh DIR` builds the static library and writes
//   DIR/ambit_swift.pc, then `PKG_CONFIG_PATH=DIR swift build` (README, "Swift").
import PackageDescription

/// The release's XCFramework zip: its URL and `swift package compute-checksum`; nil until the first release.
let ambitRelease: (url: String, checksum: String)? = nil

let ffi: Target
let ffiName: String
#if os(Linux)
let binary = false
#else
let binary = ambitRelease != nil || Context.environment["AMBIT_SWIFT_XCFRAMEWORK"] == "1"
#endif
if binary {
    ffiName = "ambit_swiftFFI"
    if Context.environment["AMBIT_SWIFT_XCFRAMEWORK"] == "1" || ambitRelease == nil {
        ffi = .binaryTarget(name: ffiName, path: "bindings-swift/swift/.artifacts/ambit_swiftFFI.xcframework")
    } else {
        ffi = .binaryTarget(name: ffiName, url: ambitRelease!.url, checksum: ambitRelease!.checksum)
    }
} else {
    // The generated C header and module map (module `ambit_swiftFFI`, linking `ambit_swift`).
    ffiName = "AmbitFFI"
    ffi = .systemLibrary(name: ffiName, path: "bindings-swift/swift/Sources/AmbitFFI", pkgConfig: "ambit_swift")
}

let package = Package(
    name: "Ambit",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "Ambit", targets: ["Ambit"]),
    ],
    targets: [
        ffi,
        .target(
            name: "Ambit",
            dependencies: [.target(name: ffiName)],
            path: "bindings-swift/swift/Sources/Ambit",
            // What the Rust static library calls on Apple platforms (its `native-static-libs`).
            linkerSettings: [
                .linkedFramework("Security", .when(platforms: [.macOS, .iOS])),
                .linkedFramework("SystemConfiguration", .when(platforms: [.macOS, .iOS])),
                .linkedFramework("CoreFoundation", .when(platforms: [.macOS, .iOS])),
            ]
        ),
    ]
)
