#!/usr/bin/env bash
# Runs the core's benchmark NAME (core/benches/NAME.rs) with a throwaway PostgreSQL server beside it
# (AMBIT_BENCH_POSTGRES_URL), stopped on exit. Usage: bench-on-postgres.sh NAME [bench args...]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/env.sh"
cd "$here"
name="$1"
shift
pg_dir="$(mktemp -u -d /tmp/ambit-pg.XXXXXX)"
trap 'bash "$here/scripts/postgres.sh" stop "$pg_dir"' EXIT
AMBIT_BENCH_POSTGRES_URL="$(bash "$here/scripts/postgres.sh" start "$pg_dir")"
export AMBIT_BENCH_POSTGRES_URL
cargo bench -p ambit-sdk --bench "$name" -- "$@"
