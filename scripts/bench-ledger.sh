#!/usr/bin/env bash
# The work ledger's benchmark (core/benches/ledger.rs) on SQLite and on a throwaway PostgreSQL server:
# claims and records per second through the API against the raw SQL, 1 and 8 clients, durable mode.
set -euo pipefail
exec bash "$(dirname "$0")/bench-on-postgres.sh" ledger "$@"
