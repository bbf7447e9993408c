#!/usr/bin/env bash
# stop.sh is "make stop": it stops what make run leaves behind and says what
# it stopped:
#
#   1. the server make run started from this checkout and dev directory, if it
#      still serves (make run in another terminal; Ctrl-C there does the same);
#   2. the private PostgreSQL that scripts/pgup.sh made for it (make run and
#      make test leave it running, so the next one starts in seconds).
#
# It stops nothing it did not start: a server only when the pid that make run
# recorded is still this checkout's bin/inventory, and a PostgreSQL only in the
# private data directory and only when pgup.sh made it there (its marker file
# is in it). A PostgreSQL that DATABASE_URL points at is never touched. The
# dev directory is $INVENTORY_DEV_DIR (default .data), as for make run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pglib.sh"
DEV_DIR=$(dev_dir)
SERVER_WAIT=${INVENTORY_STOP_WAIT:-30}

say() { echo "make stop: $*"; }
die() { echo "make stop: $*" >&2; exit 1; }

# alive PID: the process runs (a zombie waiting for its parent does not;
# one reaped meanwhile has no state at all).
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "${state:0:1}" != Z ]
}

stop_server() {
  local pidfile=$DEV_DIR/server.pid pid exe
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  # A rebuilt binary shows as "… (deleted)"; any other program with that pid
  # is not the server (the pid was reused).
  if [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" && [ "${exe% (deleted)}" = "$ROOT/bin/inventory" ]; then
    kill -TERM "$pid"
    for _ in $(seq $((SERVER_WAIT * 10))); do
      alive "$pid" || break
      sleep 0.1
    done
    alive "$pid" && die "the server (pid $pid) is still draining after ${SERVER_WAIT}s; PostgreSQL left running"
    say "stopped the server make run started (pid $pid)"
  fi
  rm -f "$pidfile"
}

stop_postgres() {
  local bindir owner dir port
  owner=$(pg_owner)
  dir=$(private_pg_dir "$owner")
  if [ ! -f "$dir/PG_VERSION" ]; then
    say "no private PostgreSQL in $(shown "$dir"): nothing else to stop"
    return 0
  fi
  if [ ! -f "$dir/$PGUP_MARKER" ]; then
    say "$(shown "$dir") holds a PostgreSQL that make run did not create (no $PGUP_MARKER in it): left as it is"
    return 0
  fi
  bindir=$(pg_bindir) || die "no PostgreSQL binaries (pg_ctl) found to stop $(shown "$dir")"
  if ! as_owner "$owner" "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    say "the private PostgreSQL in $(shown "$dir") is not running"
    return 0
  fi
  port=$(sed -n 4p "$dir/postmaster.pid" 2>/dev/null || true)
  echo "== $(date -u +%FT%TZ) pg_ctl stop $dir" >>"$DEV_DIR/pg.log"
  if ! as_owner "$owner" "$bindir/pg_ctl" -D "$dir" stop -m fast -w >>"$DEV_DIR/pg.log" 2>&1; then
    tail -n 15 "$DEV_DIR/pg.log" | sed 's/^/  /' >&2
    die "pg_ctl stop failed (the whole output: $(shown "$DEV_DIR/pg.log"))"
  fi
  say "stopped PostgreSQL (private, $(shown "$dir"), 127.0.0.1:${port:-?}); make run or make test starts it again, with its data"
}

stop_server
stop_postgres
if [ -n "${DATABASE_URL:-}" ] && [ "$DATABASE_URL" != "$(private_pg_url)" ]; then
  say "the PostgreSQL of DATABASE_URL is not make run's own: left running"
fi
