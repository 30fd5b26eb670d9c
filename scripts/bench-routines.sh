#!/usr/bin/env bash
# The routines' benchmark (core/benches/routines.rs) on SQLite and on a throwaway PostgreSQL server:
# slots fired per second and pickup lag (slot due -> run started) with 10,000 routines due at once,
# then due at a steady pace (the lag says whether the runners keep up), 1, 2 and 4 runners on
# PostgreSQL and 1 on SQLite, beside the store's own claim limit. AMBIT_BENCH_ROUTINES sets how many
# routines, AMBIT_BENCH_ROUTINES_PACE the pace (default 1,000 a second).
set -euo pipefail
exec bash "$(dirname "$0")/bench-on-postgres.sh" routines "$@"
