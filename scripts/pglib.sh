# pglib.sh: what pgup.sh, stop.sh and cluster.sh share about running a PostgreSQL of
# our own (sourced, not run).

# pg_bindir prints the newest PostgreSQL binaries' directory (initdb's).
pg_bindir() {
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return 0; fi
  local initdb
  initdb=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1) || return 1
  [ -n "$initdb" ] && dirname "$initdb"
}

# pg_owner prints the OS user our clusters run as: ourselves, or as root the
# "postgres" user (created if needed; PostgreSQL and PgBouncer refuse root).
pg_owner() {
  if [ "$(id -u)" != 0 ]; then id -un; return; fi
  id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  echo postgres
}

# pg_reachable_by USER DIR: can USER reach DIR's parent (so DIR may hold a
# cluster of USER's)? A checkout under /root is not reachable.
pg_reachable_by() {
  mkdir -p "$(dirname "$2")"
  runuser -u "$1" -- test -x "$(dirname "$2")" 2>/dev/null
}

# as_owner USER CMD...: runs CMD as USER.
as_owner() {
  local owner=$1; shift
  if [ "$(id -un)" = "$owner" ]; then "$@"; else runuser -u "$owner" -- "$@"; fi
}

# What pgup.sh (make run, make test) and stop.sh (make stop) share about the
# private cluster of a checkout. They need $ROOT, the checkout.

# PGUP_MARKER is the file pgup.sh puts in a data directory it made with
# initdb: stop.sh stops no cluster without it.
PGUP_MARKER=inventory-pgup

# dev_dir prints make run's directory (dev.env, the private cluster, its
# log), absolute: $INVENTORY_DEV_DIR, relative to the checkout, default .data.
dev_dir() {
  local d=${INVENTORY_DEV_DIR:-.data}
  case $d in /*) echo "$d" ;; *) echo "$ROOT/$d" ;; esac
}

# dev_key prints a number for the private cluster's port and fallback
# directory: of the checkout's path for the default .data (as before dev
# directories could be chosen), else of the dev directory's.
dev_key() {
  local key=$ROOT
  [ "$(dev_dir)" = "$ROOT/.data" ] || key=$(dev_dir)
  echo "$key" | cksum | cut -d' ' -f1
}

# private_pg_port prints the private cluster's port: $INVENTORY_PG_PORT, else
# one of 54329..54928 derived from dev_key (two clones side by side must not
# meet on one).
private_pg_port() { echo "${INVENTORY_PG_PORT:-$((54329 + $(dev_key) % 600))}"; }

# private_pg_url prints the URL pgup.sh prints for the private cluster.
private_pg_url() { echo "postgres://inventory:inventory@127.0.0.1:$(private_pg_port)/${INVENTORY_DB_NAME:-inventory}?sslmode=disable"; }

# private_pg_dir OWNER prints the private cluster's data directory: pg in the
# dev directory, or under /var/tmp when OWNER (postgres, as root) cannot
# reach that (a clone under /root).
private_pg_dir() {
  local dev
  dev=$(dev_dir)
  if [ "$1" = "$(id -un)" ] || pg_reachable_by "$1" "$dev/pg"; then
    echo "$dev/pg"
  else
    echo "/var/tmp/inventory-pg-$(dev_key)"
  fi
}

# shown PATH prints PATH relative to the checkout when it is inside it.
shown() { case $1 in "$ROOT"/*) echo "${1#"$ROOT"/}" ;; *) echo "$1" ;; esac; }
