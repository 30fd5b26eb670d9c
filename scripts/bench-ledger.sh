#!/usr/bin/env bash
# The work ledger's benchmark (core/benches/ledger.rs) on SQLite and on a throwaway PostgreSQL server:
# claims and records per second through the API against the raw SQL, 1 and 8 clients, durable mode.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/env.sh"
cd "$here"
pg_dir="$(mktemp -u -d /tmp/ambit-pg.XXXXXX)"
trap 'bash "$here/scripts/postgres.sh" stop "$pg_dir"' EXIT
AMBIT_BENCH_POSTGRES_URL="$(bash "$here/scripts/postgres.sh" start "$pg_dir")"
export AMBIT_BENCH_POSTGRES_URL
cargo bench -p ambit --bench ledger -- "$@"
