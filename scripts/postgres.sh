#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: initdb into a temporary directory, a free port on
# 127.0.0.1, trust authentication on loopback only, the unix socket inside the directory.
#
#   dir="$(mktemp -u -d /tmp/ambit-pg.XXXXXX)"                            # a new directory's name
#   url="$(bash scripts/postgres.sh start "$dir")"                          # prints postgres://…
#   bash scripts/postgres.sh stop "$dir"                                  # stops it, removes the dir
#
# As root (CI), the server runs as the `postgres` user: initdb refuses root.
set -euo pipefail
bin="${AMBIT_PG_BIN:-}"
if [ -z "$bin" ]; then
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bin="$d"; done
fi
if [ -z "$bin" ] && command -v initdb >/dev/null 2>&1; then bin="$(dirname "$(command -v initdb)")"; fi
if [ -z "$bin" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "postgres.sh: installing PostgreSQL from Debian's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bin="$d"; done
fi
[ -n "$bin" ] || { echo "postgres.sh: no PostgreSQL server binaries (initdb, pg_ctl) found" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd="${1:-}"; dir="${2:-}"
[ -n "$dir" ] || { echo "usage: postgres.sh start|stop DIR" >&2; exit 2; }
case "$cmd" in
  start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
      chown postgres: "$dir"; chmod 700 "$dir"
      runuser -u postgres -- test -x "$dir" \
        || { echo "postgres.sh: the postgres user cannot reach $dir (use a directory under /tmp)" >&2; exit 1; }
    fi
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    # Loopback only; durable settings as shipped (fsync and synchronous_commit on).
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) echo "usage: postgres.sh start|stop DIR" >&2; exit 2 ;;
esac
