#!/usr/bin/env bash
# pgup.sh finds or starts a PostgreSQL, makes sure the project's role and database
# exist, and prints a DATABASE_URL for it as the only line on stdout. Progress goes
# to stderr. Order of preference:
#
#   1. $DATABASE_URL, if it answers;
#   2. the machine's Debian cluster (pg_lsclusters), started if it is down;
#   3. a private cluster under ./.data/pg made with initdb (as root it runs as the
#      "postgres" user, creating it if needed);
#   4. as root on Debian: apt-get install postgresql, then 2.
#
# Otherwise it stops and says what to install or set.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DB_NAME=${INVENTORY_DB_NAME:-inventory}
ROLE=inventory
PASSWORD=inventory
PRIVATE_PORT=${INVENTORY_PG_PORT:-54329}
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

# ensure_connections raises max_connections (parallel tests each open pools) and
# reports whether a restart is needed.
needs_more_connections() {
  local have
  have=$("$@" -Atqc "SHOW max_connections")
  if [ "$have" -lt "$MIN_CONNECTIONS" ]; then
    "$@" -qc "ALTER SYSTEM SET max_connections = $MIN_CONNECTIONS" >/dev/null
    return 0
  fi
  return 1
}

debian_cluster() {
  command -v pg_lsclusters >/dev/null 2>&1 || return 1
  local line ver name port status owner
  line=$(pg_lsclusters --no-header 2>/dev/null | head -n 1)
  [ -n "$line" ] || return 1
  read -r ver name port status owner _ <<<"$line"
  if [ "$(id -u)" != 0 ] && [ "$(id -un)" != "$owner" ]; then
    answers "$(url_for "$port" "$DB_NAME")" && { url_for "$port" "$DB_NAME"; return 0; }
    log "Debian cluster $ver/$name belongs to $owner; not root, so not using it"
    return 1
  fi
  if [ "$status" != online ]; then
    log "starting Debian cluster $ver/$name on port $port"
    pg_ctlcluster "$ver" "$name" start >&2
  fi
  local psql_su=(as_owner "$owner" psql -p "$port" -d postgres)
  if needs_more_connections "${psql_su[@]}"; then
    log "raising max_connections to $MIN_CONNECTIONS; restarting $ver/$name"
    pg_ctlcluster "$ver" "$name" restart >&2
  fi
  ensure_role_and_db "${psql_su[@]}"
  url_for "$port" "$DB_NAME"
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
  if answers "$DATABASE_URL"; then echo "$DATABASE_URL"; exit 0; fi
  log "DATABASE_URL is set but does not answer; looking for a local PostgreSQL"
fi
command -v psql >/dev/null 2>&1 || install_postgres || true
debian_cluster && exit 0
private_cluster && exit 0
if install_postgres; then
  debian_cluster && exit 0
fi
die "no PostgreSQL found. Install PostgreSQL 15+ (Debian: apt-get install postgresql; or put initdb on PATH), or set DATABASE_URL to a reachable database whose role may CREATE DATABASE."
