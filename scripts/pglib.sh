# pglib.sh: what pgup.sh and cluster.sh share about running a PostgreSQL of
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
