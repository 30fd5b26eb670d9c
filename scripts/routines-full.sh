#!/usr/bin/env bash
# The routines' full multi-process week (issue 15): 200 routines over 7 simulated days, runner processes
# killed with SIGKILL at random, on SQLite and PostgreSQL, and its negative control (a broken slot claim
# caught by the same checks). Several minutes. scripts/test.sh runs the same test at its default size
# (20 routines, 2 days).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
if [ -z "${AMBIT_TEST_POSTGRES_URL:-}" ]; then
  pg_dir="$(mktemp -u -d /tmp/ambit-pg.XXXXXX)"
  trap 'bash "$here/scripts/postgres.sh" stop "$pg_dir"' EXIT
  AMBIT_TEST_POSTGRES_URL="$(bash "$here/scripts/postgres.sh" start "$pg_dir")"
  export AMBIT_TEST_POSTGRES_URL
fi
cd "$here"
AMBIT_ROUTINES_WEEK=full cargo test -p ambit-sdk --test routines_multiprocess -- --test-threads 1 --nocapture
