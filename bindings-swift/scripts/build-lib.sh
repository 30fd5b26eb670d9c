#!/usr/bin/env bash
# Builds the Swift binding's Rust library (`ambit_swift`, static) from this checkout for the host and
# writes DIR/libambit_swift.a and DIR/ambit_swift.pc, the pkg-config file the root Package.swift's
# `AmbitFFI` target names. Then a package depending on ambit (by URL or by path) builds with
#
#     PKG_CONFIG_PATH=DIR swift build
#
# The library is static, so the program it links needs nothing at run time. This is the way on Linux,
# and on macOS before a release's XCFramework exists (bindings-swift/scripts/build-xcframework.sh).
#
#   bindings-swift/scripts/build-lib.sh DIR [--debug]   # --debug: the debug build (scripts/test-swift.sh's)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:?usage: build-lib.sh DIR [--debug]}"
profile=release
[ "${2:-}" = "--debug" ] && profile=debug
target_dir="${CARGO_TARGET_DIR:-$repo/target}"

args=(-q -p ambit-swift)
[ "$profile" = release ] && args+=(--release)
(cd "$repo" && cargo build "${args[@]}")

mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Only the static library in DIR: the linker would prefer a shared one of the same name.
if ! cmp -s "$target_dir/$profile/libambit_swift.a" "$out/libambit_swift.a"; then
  cp "$target_dir/$profile/libambit_swift.a" "$out/libambit_swift.a"
fi
# The system libraries a Rust static library needs (`rustc --print native-static-libs` for the host).
case "$(uname -s)" in
  Darwin) native="-lSystem -lc -lm -framework Security -framework CoreFoundation -framework SystemConfiguration" ;;
  *) native="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc" ;;
esac
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)"
cat >"$out/ambit_swift.pc" <<PC
libdir=$out

Name: ambit_swift
Description: The ambit core for Swift (UniFFI), static
Version: $version
Libs: -L\${libdir} -lambit_swift $native
Cflags:
PC
echo "build-lib: $out/libambit_swift.a ($profile); build with PKG_CONFIG_PATH=$out swift build" >&2
