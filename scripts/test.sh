#!/usr/bin/env bash
# test.sh is "make test": the same PostgreSQL bootstrap as make run, then every
# test with the race detector against the real database.
set -euo pipefail
cd "$(dirname "$0")/.."
DATABASE_URL=$(scripts/pgup.sh)
export DATABASE_URL
# Databases left by an interrupted earlier run (tests drop their own); ones in
# use by a concurrent run are busy and stay.
psql "$DATABASE_URL" -Atqc "SELECT 'DROP DATABASE IF EXISTS ' || quote_ident(datname) || ';' FROM pg_database WHERE datname LIKE 'inventory\_test\_%'" \
  | psql "$DATABASE_URL" -q >/dev/null 2>&1 || true
# A real third-party subscription client (the graphql-ws npm package) is used
# by one test; install it from the lock file when missing.
# The browser test drives Debian's headless Chromium.
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# promtool (Debian's prometheus package) checks the shipped alert rules.
if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing prometheus (for promtool)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
if [ ! -d testdata/node-client/node_modules ]; then
  (cd testdata/node-client && npm ci --no-audit --no-fund --loglevel=error)
fi
exec go test -race -count=1 -timeout 30m "${@:-./...}"
