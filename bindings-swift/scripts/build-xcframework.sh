#!/usr/bin/env bash
# Builds the XCFramework the root Package.swift's binary target uses on Apple platforms, from the core,
# for the Apple targets: macOS (arm64 + x86_64, one universal library), iOS devices (arm64) and the iOS
# simulator (arm64 + x86_64). Needs macOS with Xcode and the Rust targets
# (`rustup target add aarch64-apple-darwin x86_64-apple-darwin aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios`).
# NOT RUN on the development machine (Linux, no Xcode): .github/workflows/release.yml runs it on a macOS
# runner; its first run there is its first real check.
#
#   bindings-swift/scripts/build-xcframework.sh [OUT_DIR]   # default bindings-swift/swift/.artifacts
#
# Writes OUT_DIR/ambit_swiftFFI.xcframework (what `AMBIT_SWIFT_XCFRAMEWORK=1 swift build` uses from a
# clone), OUT_DIR/ambit_swiftFFI.xcframework.zip and OUT_DIR/ambit_swiftFFI.xcframework.zip.checksum
# (`swift package compute-checksum`: the pair the release writes into Package.swift's `ambitRelease`).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$repo/bindings-swift/swift/.artifacts}"
target_dir="${CARGO_TARGET_DIR:-$repo/target}"
[ "$(uname -s)" = Darwin ] || { echo "build-xcframework: needs macOS with Xcode (xcodebuild, lipo)" >&2; exit 1; }

targets=(aarch64-apple-darwin x86_64-apple-darwin aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios)
for t in "${targets[@]}"; do
  (cd "$repo" && cargo build -p ambit-swift --release --target "$t")
done
lib() { echo "$target_dir/$1/release/libambit_swift.a"; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/macos" "$work/ios-sim" "$work/headers"
lipo -create "$(lib aarch64-apple-darwin)" "$(lib x86_64-apple-darwin)" -output "$work/macos/libambit_swift.a"
lipo -create "$(lib aarch64-apple-ios-sim)" "$(lib x86_64-apple-ios)" -output "$work/ios-sim/libambit_swift.a"

# The committed generated header; a module map without `link` (SwiftPM links a binary target's library).
cp "$repo/bindings-swift/swift/Sources/AmbitFFI/ambit_swiftFFI.h" "$work/headers/"
printf 'module ambit_swiftFFI {\n    header "ambit_swiftFFI.h"\n    export *\n}\n' >"$work/headers/module.modulemap"

mkdir -p "$out"
rm -rf "$out/ambit_swiftFFI.xcframework"
xcodebuild -create-xcframework \
  -library "$work/macos/libambit_swift.a" -headers "$work/headers" \
  -library "$(lib aarch64-apple-ios)" -headers "$work/headers" \
  -library "$work/ios-sim/libambit_swift.a" -headers "$work/headers" \
  -output "$out/ambit_swiftFFI.xcframework"
(cd "$out" && rm -f ambit_swiftFFI.xcframework.zip && ditto -c -k --sequesterRsrc --keepParent ambit_swiftFFI.xcframework ambit_swiftFFI.xcframework.zip)
(cd "$repo" && swift package compute-checksum "$out/ambit_swiftFFI.xcframework.zip") >"$out/ambit_swiftFFI.xcframework.zip.checksum"
echo "build-xcframework: $out/ambit_swiftFFI.xcframework.zip, checksum $(cat "$out/ambit_swiftFFI.xcframework.zip.checksum")" >&2
