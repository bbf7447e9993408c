#!/usr/bin/env bash
# run.sh is "make run": check the port, find or start PostgreSQL, migrate, load
# the demo catalog once, mint a development admin key, print how to reach the
# server, serve.
#
# Nothing here stops or changes a server that is already running: a second
# make run on a port in use stops before doing anything, and keys are only
# ever added, never revoked. Settings and the newest admin key are kept in
# $INVENTORY_DEV_DIR/dev.env (default .data/dev.env, ignored by git), which a
# second shell loads with: set -a; . .data/dev.env; set +a
#
# What keeps running: the server until Ctrl-C, and the private PostgreSQL
# pgup.sh started (for the next make run, make test and the CLI) until make
# stop (scripts/stop.sh), which also stops this server if it still serves.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/pglib.sh
DEV_DIR=${INVENTORY_DEV_DIR:-.data}
DEV_ENV=$DEV_DIR/dev.env

die() { echo "make run: $*" >&2; exit 1; }

LISTEN_ADDR=${LISTEN_ADDR:-:8080}
PORT=${LISTEN_ADDR##*:}
HOST=${LISTEN_ADDR%:*}
HOST=${HOST:-127.0.0.1}
if (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
  die "port $PORT is in use (another make run?). Stop that server, or choose another port: LISTEN_ADDR=:8081 make run"
fi

DATABASE_URL=$(scripts/pgup.sh)
export DATABASE_URL
mkdir -p "$DEV_DIR"

# Development secrets are generated once and kept in dev.env. Variables
# already set in the environment win.
key() { head -c 32 /dev/urandom | base64 | tr -d '\n'; }
umask 077
touch "$DEV_ENV"
if ! grep -q '^INVENTORY_TOKEN_SECRET=' "$DEV_ENV"; then
  echo "INVENTORY_TOKEN_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" >> "$DEV_ENV"
  echo "make run: generated a development token secret in $DEV_ENV" >&2
fi
if ! grep -q '^INVENTORY_CODES_KEY=' "$DEV_ENV"; then
  {
    echo "INVENTORY_CODES_KEY=dev1:$(key)"
    echo "INVENTORY_CODES_HMAC_KEY=$(key)"
  } >> "$DEV_ENV"
  echo "make run: generated development code encryption keys in $DEV_ENV (keep them: codes imported with them cannot be read without them)" >&2
fi
while IFS='=' read -r name value; do
  [ -n "$name" ] && [ -z "${!name:-}" ] && export "$name=$value"
done < "$DEV_ENV"

# set_env NAME VALUE records NAME=VALUE in dev.env, replacing an older value.
set_env() {
  grep -v "^$1=" "$DEV_ENV" > "$DEV_ENV.tmp" || true
  echo "$1=$2" >> "$DEV_ENV.tmp"
  mv "$DEV_ENV.tmp" "$DEV_ENV"
}

go build -ldflags "-X inventory/cli.version=$(git describe --tags --always --dirty 2>/dev/null || echo devel) -X inventory/cli.commit=$(git rev-parse HEAD 2>/dev/null)" -o bin/inventory .
# One line for the migrations, not one per migration (inventory migrate
# status lists them); an error is shown as it is.
migrated=$(bin/inventory migrate) || { echo "$migrated"; die "inventory migrate failed"; }
applied=$(grep -c '^applied' <<<"$migrated" || true)
[ "$applied" = 0 ] || echo "make run: applied $applied migrations (inventory migrate status lists them)"
bin/inventory demo
# A new development admin key each run (secrets are stored hashed, so an old
# one cannot be shown again); older ones stay valid, since a server that is
# running may be using them.
ADMIN_TOKEN=$(bin/inventory token create --role admin --name "dev-admin-$(date +%Y%m%d-%H%M%S)-$$" | tail -n 1)
set_env DATABASE_URL "$DATABASE_URL"
set_env ADMIN_TOKEN "$ADMIN_TOKEN"
if [ "$DATABASE_URL" = "$(private_pg_url)" ]; then
  STOP="Ctrl-C stops the server. PostgreSQL (private, $(shown "$(private_pg_dir "$(pg_owner)")")) keeps running: make stop stops it"
else
  STOP="Ctrl-C stops the server. The database is DATABASE_URL's: make stop leaves it alone"
fi
cat <<MSG

  Inventory server: http://localhost:$PORT/  (GraphiQL)   API: http://localhost:$PORT/graphql
  Database:         $DATABASE_URL
  Admin token:      $ADMIN_TOKEN
  In another shell: set -a; . $DEV_ENV; set +a   (DATABASE_URL, keys, ADMIN_TOKEN for the CLI and curl)
  Stop:             $STOP

  Try: curl -s localhost:$PORT/graphql -H 'Content-Type: application/json' \\
         -d '{"query":"{ availability(skus: [\"HEADPHONES-BLK\"]) { sku available } }"}'

MSG
export LISTEN_ADDR
# make stop stops this server by its pid (exec keeps it): it checks that the
# pid is still this checkout's bin/inventory first.
echo $$ >"$DEV_DIR/server.pid"
exec bin/inventory serve
