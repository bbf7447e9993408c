#!/usr/bin/env bash
# pgup.sh finds or starts a PostgreSQL, makes sure the project's role and database
# exist, and prints a DATABASE_URL for it as the only line on stdout. Progress goes
# to stderr. In order:
#
#   1. $DATABASE_URL, if set: it must answer, or this stops and says so (it never
#      quietly uses another database instead);
#   2. a private cluster of this checkout in pg under make run's directory
#      ($INVENTORY_DEV_DIR, default ./.data), made with initdb and started on
#      127.0.0.1 (port: $INVENTORY_PG_PORT, else one derived from the
#      checkout's path) if it is not running; also when $DATABASE_URL is that
#      cluster's URL (a shell that loaded dev.env) and it was stopped. As
#      root it runs as the "postgres" user (created if needed), and lives under
#      /var/tmp when that user cannot reach ./.data;
#   3. as root on Debian without initdb: apt-get install postgresql, then 2.
#
# initdb's and pg_ctl's output goes to pg.log in make run's directory (its
# tail is shown when they fail); the cluster keeps running after make run or
# make test, and make stop (scripts/stop.sh) stops it. It configures and
# restarts only the cluster it made itself; a PostgreSQL of the machine's is
# used only through DATABASE_URL, untouched.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pglib.sh"
DB_NAME=${INVENTORY_DB_NAME:-inventory}
ROLE=inventory
PASSWORD=inventory
PRIVATE_PORT=$(private_pg_port)
DEV_DIR=$(dev_dir)
SETUP_LOG=$DEV_DIR/pg.log
MIN_CONNECTIONS=300

log() { echo "pgup: $*" >&2; }
die() { echo "pgup: $*" >&2; exit 1; }

answers() { psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

url_for() { echo "postgres://$ROLE:$PASSWORD@127.0.0.1:$1/$2?sslmode=disable"; }

# ensure_role_and_db creates the project's role (CREATEDB, so tests can clone
# per-test databases from a template) and database, using a superuser psql ($@).
ensure_role_and_db() {
  "$@" -v ON_ERROR_STOP=1 -Atq <<SQL >/dev/null
SET client_min_messages = warning;
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN
    CREATE ROLE $ROLE LOGIN CREATEDB PASSWORD '$PASSWORD';
  END IF;
END \$\$;
-- DROP DATABASE ... WITH (FORCE) of a test database must be able to end an
-- autovacuum worker that happens to be connected to it.
GRANT pg_signal_backend TO $ROLE;
SQL
  if [ "$("$@" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != 1 ]; then
    "$@" -v ON_ERROR_STOP=1 -qc "CREATE DATABASE \"$DB_NAME\" OWNER $ROLE" >/dev/null
    echo "pgup: created database $DB_NAME" >>"$SETUP_LOG"
  fi
}

find_initdb() {
  if command -v initdb >/dev/null 2>&1; then command -v initdb; return 0; fi
  ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 | grep . || return 1
}

# failed WHAT LOG... stops, showing the end of each log.
failed() {
  local what=$1 f; shift
  for f in "$@"; do
    [ -s "$f" ] && { echo "pgup: the end of $(shown "$f"):" >&2; tail -n 15 "$f" | sed 's/^/  /' >&2; }
  done
  die "$what failed (the whole output: $(shown "$SETUP_LOG"))"
}

private_cluster() {
  local initdb bindir dir owner made=""
  initdb=$(find_initdb) || return 1
  bindir=$(dirname "$initdb")
  owner=$(pg_owner)
  dir=$(private_pg_dir "$owner")
  mkdir -p "$DEV_DIR"
  if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir"
    [ "$owner" = "$(id -un)" ] || chown "$owner" "$dir"
    echo "== $(date -u +%FT%TZ) initdb $dir" >>"$SETUP_LOG"
    as_owner "$owner" "$bindir/initdb" -D "$dir" -U "$ROLE" --auth=trust -E UTF8 >>"$SETUP_LOG" 2>&1 ||
      failed initdb "$SETUP_LOG"
    # The mark of a cluster this script made: make stop stops no other.
    echo "made by scripts/pgup.sh for $DEV_DIR on $(date -u +%FT%TZ); make stop stops it" >"$dir/$PGUP_MARKER"
    made=1
  fi
  if ! as_owner "$owner" "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    echo "== $(date -u +%FT%TZ) pg_ctl start $dir on 127.0.0.1:$PRIVATE_PORT" >>"$SETUP_LOG"
    as_owner "$owner" "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
      -o "-p $PRIVATE_PORT -k $dir -c listen_addresses=127.0.0.1 -c max_connections=$MIN_CONNECTIONS" start >>"$SETUP_LOG" 2>&1 ||
      failed "starting PostgreSQL on 127.0.0.1:$PRIVATE_PORT" "$SETUP_LOG" "$dir/server.log"
    if [ -n "$made" ]; then
      log "made a private PostgreSQL in $(shown "$dir") and started it on 127.0.0.1:$PRIVATE_PORT (setup output: $(shown "$SETUP_LOG"))"
    else
      log "started the private PostgreSQL in $(shown "$dir") on 127.0.0.1:$PRIVATE_PORT"
    fi
  fi
  ensure_role_and_db psql "$(url_for "$PRIVATE_PORT" postgres)"
  url_for "$PRIVATE_PORT" "$DB_NAME"
}

install_postgres() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  log "installing Debian's postgresql package"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

if [ -n "${DATABASE_URL:-}" ]; then
  if answers "$DATABASE_URL"; then
    # Not ours to reconfigure: say what to raise if it is too small for the tests.
    have=$(psql "$DATABASE_URL" -Atqc "SHOW max_connections" 2>/dev/null || echo 0)
    if [ "$have" -lt "$MIN_CONNECTIONS" ]; then
      log "DATABASE_URL's server allows $have connections; make test opens many at once. Raise max_connections to at least $MIN_CONNECTIONS there (ALTER SYSTEM SET max_connections = $MIN_CONNECTIONS, then restart it), or unset DATABASE_URL to use a private cluster."
    fi
    echo "$DATABASE_URL"
    exit 0
  fi
  # A shell that loaded dev.env after make stop: start that cluster again.
  if [ "$DATABASE_URL" = "$(private_pg_url)" ] && [ -f "$(private_pg_dir "$(pg_owner)")/$PGUP_MARKER" ]; then
    private_cluster && exit 0
  fi
  safe=$(echo "$DATABASE_URL" | sed -E 's#//([^:@/]*):[^@/]*@#//\1:***@#')
  die "DATABASE_URL ($safe) does not answer. Start that PostgreSQL, fix the URL, or unset DATABASE_URL to use a private cluster under ./.data."
fi
private_cluster && exit 0
if install_postgres; then
  private_cluster && exit 0
fi
die "no PostgreSQL found. Install PostgreSQL 15+ (Debian: apt-get install postgresql; or put initdb on PATH), or set DATABASE_URL to a reachable database whose role may CREATE DATABASE (the tests open many connections: max_connections of at least $MIN_CONNECTIONS)."
