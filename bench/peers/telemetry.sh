#!/usr/bin/env bash
# Telemetry's cost in the peer benchmark's job (bench/peers/README.md): the ambit Python runner, from
# the release wheel, with export off, on (spans to a real OTLP/HTTP receiver, tests/otel/receiver.py, in
# its own process), and on with contents; rounds interleaved; per-run CPU of the runner's process (every
# thread, the exporter's included) and the ratios to off.
#
#   bash bench/peers/telemetry.sh [ROUNDS] [RUNS]      (default 5 rounds of 300 runs, 30 warm-up;
#                                                      the runs' spans flushed inside the measured window)
#   BENCH_NO_BUILD=1 bash bench/peers/telemetry.sh …   (the wheel and provider of the last run)
#   BENCH_WORK=DIR …                                   (the wheel, venv and results in DIR instead of
#                                                      $AMBIT_CACHE/bench-otel: two sittings side by side)
#   bash bench/peers/telemetry.sh --instructions [RUNS]  (instructions per run instead of CPU time)
#
# `--instructions` counts the runner's instructions under valgrind (cachegrind, no cache simulation:
# every thread's, the exporter's included), which, unlike CPU time, does not move with the machine's
# load. Each mode runs twice, with 20 and with 20 + RUNS measured runs (default 200), and the difference
# over RUNS is the instructions of one run (start-up, the warm-up and the final flush cancel out).
set -euo pipefail
instructions=""
if [ "${1:-}" = --instructions ]; then instructions=1; shift; fi
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/scripts/env.sh"
source "$repo/scripts/llama-env.sh"  # the venv with opentelemetry-proto (the receiver)
rounds="${1:-5}" runs="${2:-300}" warmup=30
work="${BENCH_WORK:-$AMBIT_CACHE/bench-otel}"  # BENCH_WORK: another directory, for two sittings side by side
mkdir -p "$work"
if [ -z "${BENCH_NO_BUILD:-}" ]; then
  (cd "$repo" && cargo build -q --release -p ambit-test-provider --bin ambit-bench-provider)
  rm -rf "$work/wheels"
  (cd "$repo/bindings-python" && "$AMBIT_PY" -m maturin build -q --release --out "$work/wheels" 2>&1 \
    | grep -vE '^(🍹|📦|🔗|🐍|💻|✏️|🛠|📖|Built)' || true)
fi
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$work"/wheels/*.whl

provider_log="$(mktemp)" receiver_log="$(mktemp)"
# The provider serves until its standard input closes: a FIFO this script holds open.
fifo="$(mktemp -u)"
mkfifo "$fifo"
exec 3<>"$fifo"
"$CARGO_TARGET_DIR/release/ambit-bench-provider" <"$fifo" >"$provider_log" &
provider=$!
rm -f "$fifo"
"$AMBIT_PY" "$repo/tests/otel/receiver.py" >"$receiver_log" &
receiver=$!
trap 'kill $provider $receiver 2>/dev/null; rm -f "$provider_log" "$receiver_log"' EXIT
until [ -s "$provider_log" ] && [ -s "$receiver_log" ]; do sleep 0.1; done
base_url="$(head -1 "$provider_log")" otlp="$(head -1 "$receiver_log")"

one() {  # $1: off | on | content
  local extra=()
  case "$1" in
    on) extra=(BENCH_OTEL="$otlp") ;;
    content) extra=(BENCH_OTEL="$otlp" BENCH_OTEL_CONTENT=1) ;;
  esac
  (cd "$repo/bench/peers/runners/python" && env BENCH_BASE_URL="$base_url" BENCH_WIRE=chat BENCH_STREAM=0 \
    BENCH_RUNS="$runs" BENCH_WARMUP="$warmup" "${extra[@]}" "$work/venv/bin/python" ambit_py.py | tail -1)
}
if [ -n "$instructions" ]; then
  runs="${1:-200}"
  count() {  # $1: mode, $2: measured runs -> instructions of the whole process
    local extra=()
    case "$1" in
      on) extra=(BENCH_OTEL="$otlp") ;;
      content) extra=(BENCH_OTEL="$otlp" BENCH_OTEL_CONTENT=1) ;;
    esac
    (cd "$repo/bench/peers/runners/python" && env PYTHONHASHSEED=0 BENCH_BASE_URL="$base_url" BENCH_WIRE=chat \
      BENCH_STREAM=0 BENCH_RUNS="$2" BENCH_WARMUP=10 "${extra[@]}" valgrind --tool=cachegrind --cache-sim=no \
      --cachegrind-out-file=/dev/null "$work/venv/bin/python" ambit_py.py 2>&1 >/dev/null \
      | sed -n 's/.*I *refs: *//p' | tr -d ,)
  }
  declare -A per
  for mode in off on content; do
    a="$(count "$mode" 20)" b="$(count "$mode" $((20 + runs)))"
    per[$mode]=$(( (b - a) / runs ))
    echo "$mode: $a and $b instructions for 20 and $((20 + runs)) runs: ${per[$mode]} per run"
  done
  "$AMBIT_PY" -c "import sys; off, on, c = map(int, sys.argv[1:]); print(f'instructions per run: on / off = {on / off:.3f}; on with contents / off = {c / off:.3f}')" \
    "${per[off]}" "${per[on]}" "${per[content]}"
  exit 0
fi
results="$work/results.jsonl"
: >"$results"
for r in $(seq "$rounds"); do
  for mode in off on content; do
    echo "{\"round\": $r, \"mode\": \"$mode\", \"result\": $(one "$mode")}" >>"$results"
  done
done
spans="$(curl -s "$otlp/spans" | "$AMBIT_PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')"
"$AMBIT_PY" - "$results" "$spans" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
per = {m: [r["result"]["cpu_ms"] / r["result"]["runs"] for r in rows if r["mode"] == m] for m in ("off", "on", "content")}
med = {m: statistics.median(v) for m, v in per.items()}
print(f"per-run CPU (median of {len(per['off'])} rounds, ms): " + ", ".join(f"{m} {v:.3f}" for m, v in med.items()))
print(f"on / off = {med['on'] / med['off']:.3f}; on with contents / off = {med['content'] / med['off']:.3f}")
# Each round's modes ran one after the other: a round's ratio compares runs made under the same load.
paired = {m: sorted(a / b for a, b in zip(per[m], per["off"])) for m in ("on", "content")}
print("per round, on / off: " + " ".join(f"{r:.3f}" for r in paired["on"])
      + f" (median {statistics.median(paired['on']):.3f})")
print("per round, contents / off: " + " ".join(f"{r:.3f}" for r in paired["content"])
      + f" (median {statistics.median(paired['content']):.3f})")
print(f"spans received by the OTLP receiver: {sys.argv[2]}")
PY
