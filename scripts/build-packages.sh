#!/usr/bin/env bash
# Builds the packages users install, into $AMBIT_CACHE/dist (or the directory given as $1):
#   - Python: the wheel, abi3 (one wheel for every CPython >= 3.10), release, stripped, manylinux-tagged
#     by maturin's own auditwheel check (it refuses a wheel that needs a library the policy forbids),
#     and the sdist;
#   - Node, the napi-rs layout: the main package `ambit-sdk-<version>.tgz` (JavaScript, types, the native
#     loader, no binary) whose package.json lists one package per platform of `napi.targets` as
#     optionalDependencies (written here, as `napi pre-publish` does at release: they are not on the
#     registry, so the development tree's `npm ci` cannot list them), and this machine's platform
#     package `ambit-sdk-linux-x64-gnu-<version>.tgz` holding the release `.node`, stripped. The other
#     platforms' packages are built by .github/workflows/release.yml.
# Release builds are incremental: they live in the cargo target directory under $AMBIT_CACHE.
# Idempotent; runs from anywhere. Needs Rust, Node >= 20 with npm, and maturin (the virtualenv
# scripts/llama-env.sh makes, or $AMBIT_MATURIN, or one on PATH).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
out="${1:-$AMBIT_CACHE/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
maturin="${AMBIT_MATURIN:-$AMBIT_CACHE/venv/bin/maturin}"
[ -x "$maturin" ] || maturin="$(command -v maturin)"
log="$(mktemp)"
stage="$(mktemp -d)"
trap 'rm -rf "$log" "$stage"' EXIT
# Quiet unless it fails: the tools print a line per step.
quiet() { if ! "$@" >"$log" 2>&1; then cat "$log" >&2; return 1; fi; }

rm -f "$out"/ambit-*.whl "$out"/ambit-*.tar.gz "$out"/ambit-*.tgz "$out"/ambit_sdk-*.whl "$out"/ambit_sdk-*.tar.gz

# Both bindings are built for the host's triple, named: napi passes --target, and with maturin passing
# the same the two release builds share one target directory (the core is compiled once).
host="$(rustc -vV | sed -n 's/^host: //p')"

# Python.
(cd "$here/bindings-python" && quiet "$maturin" build --release --strip --target "$host" --out "$out" \
  && quiet "$maturin" sdist --out "$out")

# Node: the release binary and its loader, built into the stage (the development tree's debug build
# in bindings-node/native stays as it is).
node_dir="$here/bindings-node"
[ -d "$node_dir/node_modules/@napi-rs/cli" ] || (cd "$node_dir" && quiet npm ci --no-audit --no-fund)
(cd "$node_dir" && quiet npx napi build --platform --release --strip --output-dir "$stage/build" \
  --js index.js --dts index.d.ts)
platform="linux-x64-gnu"
binary="$stage/build/ambit.$platform.node"
[ -f "$binary" ] || { echo "napi build made no $binary" >&2; exit 1; }
# The main package: the files package.json lists, the loader in native/, the licence.
mkdir -p "$stage/main/native" "$stage/platform"
node - "$node_dir" "$stage/main" <<'JS'
const fs = require('node:fs');
const path = require('node:path');
const [src, dst] = process.argv.slice(2);
const pkg = JSON.parse(fs.readFileSync(path.join(src, 'package.json'), 'utf8'));
for (const file of pkg.files.filter((f) => !f.startsWith('native/'))) {
  fs.copyFileSync(path.join(src, file), path.join(dst, file));
}
// The napi-rs way: one optional dependency per platform package, at this version; npm installs the
// one whose `os`, `cpu` and `libc` match and skips the rest.
const triples = {
  'x86_64-unknown-linux-gnu': 'linux-x64-gnu', 'aarch64-unknown-linux-gnu': 'linux-arm64-gnu',
  'x86_64-apple-darwin': 'darwin-x64', 'aarch64-apple-darwin': 'darwin-arm64',
  'x86_64-pc-windows-msvc': 'win32-x64-msvc',
};
pkg.optionalDependencies = {};
for (const target of pkg.napi.targets) {
  const platform = triples[target];
  if (!platform) throw new Error(`package.json napi.targets: no npm platform known for ${target}`);
  const dir = path.join(src, 'npm', platform);
  const platformPkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  if (platformPkg.version !== pkg.version) {
    throw new Error(`${dir}/package.json is version ${platformPkg.version}, the package ${pkg.version}`);
  }
  pkg.optionalDependencies[platformPkg.name] = pkg.version;
}
delete pkg.devDependencies;
delete pkg.scripts;
fs.writeFileSync(path.join(dst, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
JS
cp "$stage/build/index.js" "$stage/build/index.d.ts" "$stage/main/native/"
cp "$here/LICENSE" "$stage/main/"
cp "$node_dir/npm/$platform/package.json" "$node_dir/npm/$platform/README.md" "$here/LICENSE" "$binary" \
  "$stage/platform/"
(cd "$stage/main" && quiet npm pack --pack-destination "$out")
(cd "$stage/platform" && quiet npm pack --pack-destination "$out")

ls "$out"/ambit_sdk-*.whl "$out"/ambit_sdk-*.tar.gz "$out"/ambit-sdk-*.tgz
