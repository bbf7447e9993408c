#!/usr/bin/env bash
# test.sh is "make test": the same PostgreSQL bootstrap as make run, then every
# test with the race detector against the real database.
set -euo pipefail
cd "$(dirname "$0")/.."
DATABASE_URL=$(scripts/pgup.sh)
export DATABASE_URL
# This run's test databases are inventory_test_<run>_*: each test drops its
# own, and what an interrupted test leaves is dropped when the run ends. Other
# runs' databases, concurrent or not, are never touched.
INVENTORY_TEST_RUN=r$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
export INVENTORY_TEST_RUN
drop_leftovers() {
  psql "$DATABASE_URL" -Atqc "SELECT 'DROP DATABASE IF EXISTS ' || quote_ident(datname) || ' WITH (FORCE);' FROM pg_database WHERE datname LIKE 'inventory\_test\_${INVENTORY_TEST_RUN}\_%'" \
    | psql "$DATABASE_URL" -q >/dev/null 2>&1 || true
}
trap drop_leftovers EXIT
# Real third-party Node packages (the graphql-ws and graphql-sse clients, the
# graphql-http conformance audit) are used by some tests; install them from
# the lock file when missing or when the lock file changed since.
# The browser test drives Debian's headless Chromium.
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# The scale-out faults run PgBouncer (Debian's package) of their own.
command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# promtool (Debian's prometheus package) checks the shipped alert rules.
if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test.sh: installing prometheus (for promtool)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
if [ ! -d e2e/testdata/node-client/node_modules ] ||
  [ e2e/testdata/node-client/package-lock.json -nt e2e/testdata/node-client/node_modules/.package-lock.json ]; then
  (cd e2e/testdata/node-client && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ $# -gt 0 ]; then
  go test -race -count=1 -timeout 30m "$@"
  exit
fi
# Tests that measure a checkout's latency under attack must not also measure
# the other packages' tests sharing the cores: they run alone, after the rest,
# and without the race detector. They time the real server binary (never
# race-built); -race would only slow their own load generator, whose eight
# clients decoding 2 MB answers then took the cores from the server (p99 567 ms
# in one run, against 63-82 ms without).
alone='^(TestAnonymousLoadLeavesCheckoutsTheirShare)$'
go test -race -count=1 -timeout 30m -skip "$alone" ./...
echo "test.sh: latency tests, alone, without -race" >&2
go test -count=1 -timeout 10m -run "$alone" -v ./e2e/ | grep -E '^(=== RUN|--- |    |ok|FAIL|PASS)'
