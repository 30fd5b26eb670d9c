#!/usr/bin/env bash
# The side-by-side benchmark (bench/peers/README.md): installs the peers into $AMBIT_CACHE/bench,
# builds ambit's runners in release mode (the Python wheel, the Node addon, the Rust runners, the Swift
# executable), then runs every runner interleaved against one loopback provider and prints the table.
#
#   bash bench/peers/run.sh [--quick] [--rounds N] [--runs N] [--warmup N] [--only TEXT]
#   bash bench/peers/run.sh --phase concurrent [--concurrency 10,100,1000,10000] [--latency 0,50,500] [--only TEXT]
#   bash bench/peers/run.sh --phase long-sessions
#   ... --tls (or --transport plain,tls): HTTPS with HTTP/2 by ALPN, as the hosted APIs serve
#
# `--phase concurrent` (issue 18): N weather jobs in flight at once in one process, per runner; it skips
# the Swift runner and the binding-call figures.
# `--tls`: the provider serves HTTPS (a CA made at start, HTTP/2 or HTTP/1.1 by ALPN) and every runner
# trusts the CA the standard way for its stack (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS); `--transport
# plain,tls` runs both, interleaved runner by runner.
# Results: $AMBIT_CACHE/bench/results.{md,json}. Idempotent; a second run rebuilds only what changed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../../scripts/env.sh
source "$repo/scripts/env.sh"
bench="$AMBIT_CACHE/bench"
mkdir -p "$bench"

args=()
phase=weather
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) args+=(--rounds 1 --runs 20 --warmup 3) ;;
    --tls) args+=(--transport tls) ;;
    --phase) phase="$2"; args+=(--phase "$2"); shift ;;
    *) args+=("$1") ;;
  esac
  shift
done

# `--phase long-sessions` (issue 18, phase 2): one turn's cost as a session grows to 10, 100 and 1,000
# messages, without a store and on SQLite (and PostgreSQL when AMBIT_BENCH_POSTGRES_URL is set): a Rust
# bench of the core's own session path (core/benches/long_sessions.rs); the peers have no session store.
if [ "$phase" = long-sessions ]; then
  cd "$repo"
  exec cargo bench -q -p ambit-sdk --bench long_sessions
fi

echo "bench: installing the peers" >&2
bash "$repo/bench/peers/install.sh" >&2

echo "bench: building ambit (release)" >&2
# Two invocations: `--bin` narrows every package of its invocation to that binary (no cdylibs).
(cd "$repo" && cargo build -q --release -p ambit-test-provider --bin ambit-bench-provider)
if [ "$phase" = weather ]; then
  (cd "$repo" && cargo build -q --release -p ambit-bench-runners -p ambit-node -p ambit-swift)
else
  (cd "$repo" && cargo build -q --release -p ambit-bench-runners -p ambit-node)
fi
rel="$CARGO_TARGET_DIR/release"

# Python: the wheel a user installs, built in release mode, into the bench venv beside the peers.
"$bench/venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2"
rm -rf "$bench/wheels"
(cd "$repo/bindings-python" && "$bench/venv/bin/maturin" build -q --release --out "$bench/wheels" 2>&1 \
  | grep -vE '^(🍹|📦|🔗|🐍|💻|✏️|🛠|📖|Built)' || true)
"$bench/venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$bench"/wheels/*.whl

# Node: the package's JavaScript with the release addon.
node_pkg="$bench/ambit-node"
rm -rf "$node_pkg" && mkdir -p "$node_pkg/native"
cp "$repo"/bindings-node/{package.json,index.d.ts} "$repo"/bindings-node/*.js "$node_pkg/"
cp "$rel/libambit_node.so" "$node_pkg/native/ambit.node"
echo "module.exports = require('./ambit.node');" >"$node_pkg/native/index.js"

if [ "$phase" != weather ]; then
  python3 "$repo/bench/peers/matrix.py" "$bench" "$repo" >"$bench/runners.json"
  echo "bench: running --phase $phase (progress on standard error)" >&2
  exec python3 "$repo/bench/peers/driver.py" --provider "$rel/ambit-bench-provider" --runners "$bench/runners.json" \
    --out "$bench/results-$phase.json" --markdown "$bench/results-$phase.md" "${args[@]}"
fi

# Swift: a package of the binding's sources, the release library and the runner as an executable.
bash "$repo/scripts/swift-toolchain.sh" ensure
(cd "$repo/bindings-swift/uniffi-bindgen" && cargo build -q --locked)
pkg="$bench/swift-pkg"
mkdir -p "$pkg/Sources/Ambit" "$pkg/Sources/AmbitFFI" "$pkg/Sources/AmbitBench" "$pkg/.artifacts/lib"
put() { if ! cmp -s "$1" "$2"; then cp "$1" "$2"; fi; }
for f in "$repo"/bindings-swift/swift/Sources/Ambit/*.swift; do
  case "$(basename "$f")" in ambit_swift.swift) ;; *) put "$f" "$pkg/Sources/Ambit/$(basename "$f")" ;; esac
done
gen="$(mktemp -d)"
trap 'rm -rf "$gen"' EXIT
"$CARGO_TARGET_DIR/debug/uniffi-bindgen" generate --library "$rel/libambit_swift.so" --language swift \
  --out-dir "$gen" 2>&1 | { grep -v 'Unable to auto-format' || true; } >&2
put "$gen/ambit_swift.swift" "$pkg/Sources/Ambit/ambit_swift.swift"
put "$gen/ambit_swiftFFI.h" "$pkg/Sources/AmbitFFI/ambit_swiftFFI.h"
printf 'module ambit_swiftFFI {\n    header "ambit_swiftFFI.h"\n    export *\n}\n' >"$gen/module.modulemap"
put "$gen/module.modulemap" "$pkg/Sources/AmbitFFI/module.modulemap"
put "$rel/libambit_swift.so" "$pkg/.artifacts/lib/libambit_swift.so"
put "$repo/bench/peers/runners/swift/main.swift" "$pkg/Sources/AmbitBench/main.swift"
cat >"$gen/Package.swift" <<'EOF'
// swift-tools-version:5.9
import PackageDescription
let libDir = Context.packageDirectory + "/.artifacts/lib"
let package = Package(
    name: "AmbitBench",
    targets: [
        .systemLibrary(name: "AmbitFFI", path: "Sources/AmbitFFI"),
        .target(name: "Ambit", dependencies: ["AmbitFFI"], path: "Sources/Ambit",
                linkerSettings: [.linkedLibrary("ambit_swift"),
                                 .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir])]),
        .executableTarget(name: "AmbitBench", dependencies: ["Ambit"], path: "Sources/AmbitBench"),
    ]
)
EOF
put "$gen/Package.swift" "$pkg/Package.swift"
echo "bench: building the Swift runner (release)" >&2
bash "$repo/scripts/swift-toolchain.sh" run "$pkg" swift build -q -c release --scratch-path "$pkg/.build" >&2

# Inside the Swift package: the Swift runner sees only that directory.
python3 "$repo/bench/peers/make_tools.py" "$pkg/tools500.json" 500
python3 "$repo/bench/peers/matrix.py" "$bench" "$repo" >"$bench/runners.json"

echo "bench: running (progress on standard error)" >&2
status=0
python3 "$repo/bench/peers/driver.py" --provider "$rel/ambit-bench-provider" --runners "$bench/runners.json" \
  --out "$bench/results.json" --markdown "$bench/results.md" "${args[@]}" || status=$?

# The cost of one call into the core and back, from each binding's release build (goal: 2 µs or less).
echo "bench: binding call cost" >&2
py_call="$("$bench/venv/bin/python" "$repo/bench/peers/binding_call.py" 2>/dev/null | tail -n 1)"
node_call="$(AMBIT_NODE="$node_pkg" node "$repo/bench/peers/binding_call.mjs" 2>/dev/null | tail -n 1)"
{
  echo
  echo "### One call into the core and back"
  echo
  echo "- Python: $py_call"
  echo "- Node: $node_call"
} | tee -a "$bench/results.md"
exit "$status"
