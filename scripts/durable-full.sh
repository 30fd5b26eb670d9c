#!/usr/bin/env bash
# The durable-run tests (core/tests/durable.rs) at the counts of issue 13, on SQLite and on a throwaway
# PostgreSQL server: 8 processes x 200 racing resumes of one parked approval per store, and 250 resumes
# per store (500 in all) killed with SIGKILL at random points. Prints the figures: trials, double
# executions, lost approvals. The default suite runs the same tests at 20 trials and 25 kills per store.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/env.sh"
cd "$here"
if [ -z "${AMBIT_TEST_POSTGRES_URL:-}" ]; then
    pg_dir="$(mktemp -u -d /tmp/ambit-pg.XXXXXX)"
    trap 'bash "$here/scripts/postgres.sh" stop "$pg_dir"' EXIT
    AMBIT_TEST_POSTGRES_URL="$(bash "$here/scripts/postgres.sh" start "$pg_dir")"
    export AMBIT_TEST_POSTGRES_URL
fi
export AMBIT_DURABLE_TRIALS="${AMBIT_DURABLE_TRIALS:-200}" AMBIT_DURABLE_KILLS="${AMBIT_DURABLE_KILLS:-250}"
cargo test -p ambit-sdk --test durable -- --nocapture --test-threads 1 racing killed_at_random 2>&1 | grep -E '^durable|^test |test result'
