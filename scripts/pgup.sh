#!/usr/bin/env bash
# pgup.sh finds or starts a PostgreSQL, makes sure the project's role and database
# exist, and prints a DATABASE_URL for it as the only line on stdout. Progress goes
# to stderr. In order:
#
#   1. $DATABASE_URL, if set: it must answer, or this stops and says so (it never
#      quietly uses another database instead);
#   2. a private cluster of this checkout under ./.data/pg, made with initdb and
#      started on 127.0.0.1 (port: $INVENTORY_PG_PORT, else one derived from the
#      checkout's path) if it is not running. As
#      root it runs as the "postgres" user (created if needed), and lives under
#      /var/tmp when that user cannot reach ./.data;
#   3. as root on Debian without initdb: apt-get install postgresql, then 2.
#
# It configures and restarts only the cluster it made itself; a PostgreSQL of
# the machine's is used only through DATABASE_URL, untouched.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DB_NAME=${INVENTORY_DB_NAME:-inventory}
ROLE=inventory
PASSWORD=inventory
# Each checkout's cluster gets a port of its own (two clones side by side must
# not meet on one), 54329..54928, unless INVENTORY_PG_PORT says otherwise.
PRIVATE_PORT=${INVENTORY_PG_PORT:-$((54329 + $(echo "$ROOT" | cksum | cut -d' ' -f1) % 600))}
MIN_CONNECTIONS=300

log() { echo "pgup: $*" >&2; }
die() { echo "pgup: $*" >&2; exit 1; }

answers() { psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

url_for() { echo "postgres://$ROLE:$PASSWORD@127.0.0.1:$1/$2?sslmode=disable"; }

# as_owner runs a command as the OS user that owns the cluster ($1).
as_owner() {
  local owner=$1; shift
  if [ "$(id -un)" = "$owner" ]; then "$@"; else runuser -u "$owner" -- "$@"; fi
}

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
    log "created database $DB_NAME"
  fi
}

find_initdb() {
  if command -v initdb >/dev/null 2>&1; then command -v initdb; return 0; fi
  ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 | grep . || return 1
}

private_cluster() {
  local initdb bindir dir owner
  initdb=$(find_initdb) || return 1
  bindir=$(dirname "$initdb")
  dir="$ROOT/.data/pg"
  owner=$(id -un)
  if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id -u "$owner" >/dev/null 2>&1 || useradd --system --no-create-home "$owner"
    # The cluster's owner must be able to reach the data folder; a clone under
    # /root is not reachable, so root's private cluster lives under /var/tmp.
    if ! runuser -u "$owner" -- test -x "$ROOT/.data" 2>/dev/null; then
      mkdir -p "$ROOT/.data"
      if ! runuser -u "$owner" -- test -x "$ROOT/.data" 2>/dev/null; then
        dir="/var/tmp/inventory-pg-$(echo "$ROOT" | cksum | cut -d' ' -f1)"
      fi
    fi
  fi
  if [ ! -f "$dir/PG_VERSION" ]; then
    log "initdb $dir ($bindir)"
    mkdir -p "$dir"
    [ "$owner" = "$(id -un)" ] || chown "$owner" "$dir"
    as_owner "$owner" "$bindir/initdb" -D "$dir" -U "$ROLE" --auth=trust -E UTF8 >&2
  fi
  if ! as_owner "$owner" "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    log "starting private cluster in $dir on 127.0.0.1:$PRIVATE_PORT"
    as_owner "$owner" "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w \
      -o "-p $PRIVATE_PORT -k $dir -c listen_addresses=127.0.0.1 -c max_connections=$MIN_CONNECTIONS" start >&2
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
  safe=$(echo "$DATABASE_URL" | sed -E 's#//([^:@/]*):[^@/]*@#//\1:***@#')
  die "DATABASE_URL ($safe) does not answer. Start that PostgreSQL, fix the URL, or unset DATABASE_URL to use a private cluster under ./.data."
fi
private_cluster && exit 0
if install_postgres; then
  private_cluster && exit 0
fi
die "no PostgreSQL found. Install PostgreSQL 15+ (Debian: apt-get install postgresql; or put initdb on PATH), or set DATABASE_URL to a reachable database whose role may CREATE DATABASE (the tests open many connections: max_connections of at least $MIN_CONNECTIONS)."
