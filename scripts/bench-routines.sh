#!/usr/bin/env bash
# The routines' benchmark (core/benches/routines.rs) on SQLite and on a throwaway PostgreSQL server:
# slots fired per second and pickup lag (slot due -> run started) with 10,000 routines due at once,
# 1, 2 and 4 runners on PostgreSQL and 1 on SQLite, beside the store's own claim limit.
# AMBIT_BENCH_ROUTINES sets how many routines.
set -euo pipefail
exec bash "$(dirname "$0")/bench-on-postgres.sh" routines "$@"
