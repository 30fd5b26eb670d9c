#!/usr/bin/env bash
# Issue 18's benchmarks, every phase, in one command (docs/benchmarks.md has each phase's figures and
# what they mean). Long: the full concurrent matrix alone runs ~30 minutes on 2 CPUs. Results land in
# $AMBIT_CACHE/bench/results*.{md,json} and on standard output.
#
#   bash scripts/bench-scale.sh           # the figures
#   bash scripts/bench-scale.sh --quick   # every phase once, small: checks that each runs (minutes)
#
# 1. The weather job side by side with the peers (bench/peers/run.sh): CPU and wall per run, start-up to
#    a constructed agent, the 500-tool and deferred runs, the Rust minimal floor, one binding call.
# 2. Many runs in flight in one process: 10 to 10,000 at 0, 50 and 500 ms of model latency, plain HTTP
#    and HTTPS (HTTP/2 by ALPN) interleaved.
# 3. Long sessions: one turn's cost at 10, 100 and 1,000 messages, no store, SQLite and PostgreSQL.
# 4. The work ledger's claim through the API against the raw SQL, 1 and 8 clients, SQLite and PostgreSQL.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
weather=() concurrent=()
if [ "${1:-}" = --quick ]; then
  weather=(--quick)
  concurrent=(--concurrency 10 --latency 0 --only ambit)
  export AMBIT_BENCH_LEDGER_ROUNDS=1 AMBIT_BENCH_LEDGER_ROUND_MS=200
fi
echo "==> bench-scale: the weather job, side by side" >&2
bash bench/peers/run.sh "${weather[@]}"
echo "==> bench-scale: many runs in flight" >&2
bash bench/peers/run.sh --phase concurrent --transport plain,tls "${concurrent[@]}"
echo "==> bench-scale: long sessions" >&2
bash scripts/bench-on-postgres.sh long_sessions
echo "==> bench-scale: the ledger's claim" >&2
bash scripts/bench-ledger.sh
