#!/usr/bin/env bash
# cluster.sh is "make cluster": the production topology on this machine, from
# the repository alone. It starts
#
#   - a primary PostgreSQL (wal_level=replica), made with initdb;
#   - a hot standby streaming from it, made with pg_basebackup -R;
#   - PgBouncer in transaction mode in front of the primary (Debian's
#     pgbouncer package, installed by this script when missing), with at most
#     $INVENTORY_CLUSTER_SERVER_CONNS (default 20) server connections in all;
#   - three server instances on their own ports, each with its pooled URL on
#     PgBouncer, its direct URL on the primary and its replica URL on the
#     standby;
#
# prints where everything is, and stops it all on Ctrl-C.
#
#   scripts/cluster.sh          # make cluster: everything, until Ctrl-C
#   scripts/cluster.sh db       # only the databases and PgBouncer; prints
#                               # INVENTORY_CLUSTER_*_URL lines (for tests)
#   scripts/cluster.sh stop     # stops what db started
#
# Everything lives under $INVENTORY_CLUSTER_DIR (default .data/cluster); it
# configures, starts and stops only the clusters and the PgBouncer it made
# there, never a PostgreSQL of the machine's.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/pglib.sh"

BASE=${INVENTORY_CLUSTER_DIR:-$ROOT/.data/cluster}
# Ports of their own per checkout, three in a row, below Linux's ephemeral
# range (32768 up): a port there can be held by any client socket (one to
# another PostgreSQL, say) at the moment the postmaster wants to bind it.
PORT=${INVENTORY_CLUSTER_PORT:-$((30000 + ($(echo "$ROOT" | cksum | cut -d' ' -f1) % 300) * 5))}
PRIMARY_PORT=$PORT
STANDBY_PORT=$((PORT + 1))
BOUNCER_PORT=$((PORT + 2))
HTTP_PORT=${INVENTORY_CLUSTER_HTTP_PORT:-8091}
SERVER_CONNS=${INVENTORY_CLUSTER_SERVER_CONNS:-20}
ROLE=inventory
PASSWORD=inventory
DB_NAME=inventory

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }

BINDIR=$(pg_bindir) || die "no PostgreSQL binaries (initdb) found: apt-get install postgresql"
OWNER=$(pg_owner)
[ "$OWNER" = "$(id -un)" ] || pg_reachable_by "$OWNER" "$BASE" || BASE="/var/tmp/inventory-cluster-$(echo "$ROOT" | cksum | cut -d' ' -f1)"
PRIMARY=$BASE/primary
STANDBY=$BASE/standby
BOUNCER=$BASE/pgbouncer

url() { echo "postgres://$ROLE:$PASSWORD@127.0.0.1:$1/${2:-$DB_NAME}?sslmode=disable"; }

running() { as_owner "$OWNER" "$BINDIR/pg_ctl" -D "$1" status >/dev/null 2>&1; }

start_primary() {
  if [ ! -f "$PRIMARY/PG_VERSION" ]; then
    log "initdb $PRIMARY"
    mkdir -p "$PRIMARY"
    [ "$OWNER" = "$(id -un)" ] || chown "$OWNER" "$BASE" "$PRIMARY"
    as_owner "$OWNER" "$BINDIR/initdb" -D "$PRIMARY" -U "$ROLE" --auth=trust -E UTF8 >"$BASE/initdb.log" 2>&1 ||
      { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
    # initdb's pg_hba.conf already lets local and 127.0.0.1 replicate (trust).
    cat >>"$PRIMARY/postgresql.conf" <<CONF
# make cluster
listen_addresses = '127.0.0.1'
port = $PRIMARY_PORT
unix_socket_directories = '$BASE'
max_connections = 300
wal_level = replica
max_wal_senders = 5
wal_keep_size = 256MB
hot_standby = on
CONF
  fi
  if ! running "$PRIMARY"; then
    log "starting the primary on 127.0.0.1:$PRIMARY_PORT"
    as_owner "$OWNER" "$BINDIR/pg_ctl" -D "$PRIMARY" -l "$PRIMARY/server.log" -w start >/dev/null
  fi
  psql "$(url "$PRIMARY_PORT" postgres)" -v ON_ERROR_STOP=1 -Atq >/dev/null <<SQL
SET client_min_messages = warning;
SELECT 'CREATE DATABASE $DB_NAME' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB_NAME') \gexec
-- Through PgBouncer the server sends no startup parameters: its session
-- settings are the role's defaults (the values of the server's defaults).
ALTER ROLE $ROLE SET statement_timeout = '30s';
ALTER ROLE $ROLE SET lock_timeout = '10s';
ALTER ROLE $ROLE SET jit = off;
SQL
}

start_standby() {
  if [ ! -f "$STANDBY/PG_VERSION" ]; then
    log "pg_basebackup of the primary into $STANDBY"
    mkdir -p "$STANDBY"
    [ "$OWNER" = "$(id -un)" ] || chown "$OWNER" "$STANDBY"
    chmod 700 "$STANDBY"
    as_owner "$OWNER" "$BINDIR/pg_basebackup" -h 127.0.0.1 -p "$PRIMARY_PORT" -U "$ROLE" -D "$STANDBY" -R -X stream -c fast
    cat >>"$STANDBY/postgresql.conf" <<CONF
# make cluster: the standby
port = $STANDBY_PORT
unix_socket_directories = '$BASE'
CONF
  fi
  if ! running "$STANDBY"; then
    log "starting the standby on 127.0.0.1:$STANDBY_PORT"
    as_owner "$OWNER" "$BINDIR/pg_ctl" -D "$STANDBY" -l "$STANDBY/server.log" -w start >/dev/null
  fi
}

install_pgbouncer() {
  command -v pgbouncer >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 ||
    die "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
  log "installing Debian's pgbouncer package"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
  }
  # The package starts a pgbouncer of its own on 6432; that one is the
  # machine's, not ours, and is left as it is.
}

bouncer_pid() { [ -f "$BOUNCER/pgbouncer.pid" ] && kill -0 "$(cat "$BOUNCER/pgbouncer.pid")" 2>/dev/null && cat "$BOUNCER/pgbouncer.pid"; }

start_bouncer() {
  install_pgbouncer
  mkdir -p "$BOUNCER"
  [ "$OWNER" = "$(id -un)" ] || chown "$OWNER" "$BOUNCER"
  echo "\"$ROLE\" \"$PASSWORD\"" >"$BOUNCER/userlist.txt"
  # Transaction pooling: a server connection belongs to a client for one
  # transaction only. "*" routes every database name (tests make their own)
  # to the primary; max_db_connections bounds the server connections per
  # database, max_user_connections the total of the role's.
  cat >"$BOUNCER/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$PRIMARY_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir = $BOUNCER
auth_type = trust
auth_file = $BOUNCER/userlist.txt
admin_users = $ROLE
pool_mode = transaction
max_client_conn = 4000
default_pool_size = $SERVER_CONNS
max_db_connections = $SERVER_CONNS
max_user_connections = $SERVER_CONNS
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = $BOUNCER/pgbouncer.log
pidfile = $BOUNCER/pgbouncer.pid
INI
  [ "$OWNER" = "$(id -un)" ] || chown "$OWNER" "$BOUNCER"/*
  if [ -z "$(bouncer_pid)" ]; then
    log "starting PgBouncer (transaction pooling, $SERVER_CONNS server connections) on 127.0.0.1:$BOUNCER_PORT"
    as_owner "$OWNER" pgbouncer -d "$BOUNCER/pgbouncer.ini"
    for _ in $(seq 50); do psql "$(url "$BOUNCER_PORT")" -Atqc 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
    psql "$(url "$BOUNCER_PORT")" -Atqc 'select 1' >/dev/null || die "PgBouncer does not answer; see $BOUNCER/pgbouncer.log"
  fi
}

stop_all() {
  if pid=$(bouncer_pid); then kill "$pid" 2>/dev/null || true; fi
  for dir in "$STANDBY" "$PRIMARY"; do
    if [ -f "$dir/PG_VERSION" ] && running "$dir"; then
      as_owner "$OWNER" "$BINDIR/pg_ctl" -D "$dir" -m fast -w stop >/dev/null || true
    fi
  done
  log "stopped (data kept in $BASE; rm -rf it to start afresh)"
}

print_urls() {
  echo "INVENTORY_CLUSTER_PRIMARY_URL=$(url "$PRIMARY_PORT")"
  echo "INVENTORY_CLUSTER_POOLED_URL=$(url "$BOUNCER_PORT")"
  echo "INVENTORY_CLUSTER_REPLICA_URL=$(url "$STANDBY_PORT")"
  echo "INVENTORY_CLUSTER_BOUNCER_PID=$(bouncer_pid)"
  echo "INVENTORY_CLUSTER_STANDBY_DIR=$STANDBY"
}

databases() {
  mkdir -p "$BASE"
  start_primary
  start_standby
  start_bouncer
}

case "${1:-all}" in
db)
  databases
  print_urls
  ;;
stop)
  stop_all
  ;;
all)
  databases
  (cd "$ROOT" && go build -o bin/inventory .)
  pids=()
  # Ctrl-C (or TERM): the instances shut down gracefully, then the
  # databases and PgBouncer stop.
  trap 'kill "${pids[@]}" 2>/dev/null; wait; stop_all; exit 0' INT TERM
  # One set of secrets for all three (a checkout token minted by one is
  # verified by the others; a code sealed by one is opened by all), made
  # once and kept with the data, so codes stay readable across restarts.
  SECRETS=$BASE/secrets.env
  if [ ! -f "$SECRETS" ]; then
    key() { head -c 32 /dev/urandom | base64 | tr -d '\n'; }
    (umask 077 && {
      echo "INVENTORY_TOKEN_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
      echo "INVENTORY_CODES_KEY=cluster1:$(key)"
      echo "INVENTORY_CODES_HMAC_KEY=$(key)"
    } >"$SECRETS")
  fi
  set -a; . "$SECRETS"; set +a
  # Migrations need a session (an advisory lock): the direct URL.
  DATABASE_URL=$(url "$PRIMARY_PORT") "$ROOT/bin/inventory" migrate >/dev/null
  ADMIN_TOKEN=$(DATABASE_URL=$(url "$PRIMARY_PORT") "$ROOT/bin/inventory" token create --role admin --name "cluster-admin-$(date +%Y%m%d-%H%M%S)-$$" | tail -n 1)
  for i in 0 1 2; do
    port=$((HTTP_PORT + i))
    LISTEN_ADDR=127.0.0.1:$port \
      DATABASE_URL=$(url "$BOUNCER_PORT") \
      DATABASE_DIRECT_URL=$(url "$PRIMARY_PORT") \
      DATABASE_REPLICA_URL=$(url "$STANDBY_PORT") \
      INVENTORY_DB_POOLER=transaction \
      "$ROOT/bin/inventory" serve >"$BASE/instance-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in 0 1 2; do
    port=$((HTTP_PORT + i))
    for _ in $(seq 150); do
      curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
      kill -0 "${pids[$i]}" 2>/dev/null || break
      sleep 0.2
    done
    if ! curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
      tail -n 20 "$BASE/instance-$i.log" >&2
      kill "${pids[@]}" 2>/dev/null || true
      stop_all
      die "instance $i on port $port did not become ready (log above: $BASE/instance-$i.log)"
    fi
  done
  cat <<MSG

  make cluster is up (Ctrl-C stops everything):
    primary     $(url "$PRIMARY_PORT")
    standby     $(url "$STANDBY_PORT")   (streaming from the primary)
    PgBouncer   $(url "$BOUNCER_PORT")   (transaction pooling, at most $SERVER_CONNS server connections)
    instances   http://127.0.0.1:$HTTP_PORT/  http://127.0.0.1:$((HTTP_PORT + 1))/  http://127.0.0.1:$((HTTP_PORT + 2))/   (all ready)
    admin token $ADMIN_TOKEN
    logs        $BASE/instance-{0,1,2}.log, $PRIMARY/server.log, $STANDBY/server.log, $BOUNCER/pgbouncer.log

MSG
  wait
  ;;
*)
  die "usage: scripts/cluster.sh [db|stop]"
  ;;
esac
