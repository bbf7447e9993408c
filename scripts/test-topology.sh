#!/usr/bin/env bash
# test-topology.sh is "make test-topology" (CI runs it after make test): the
# guarantees that matter for scale-out, run against the production topology
# of scripts/cluster.sh — a primary, a streaming standby and PgBouncer in
# transaction mode (20 server connections) — with every server instance's
# requests through PgBouncer, its sessions direct to the primary and its
# storefront reads on the standby. Outcomes are counted in SQL on the
# primary. The topology lives in .data/cluster-test and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export INVENTORY_CLUSTER_DIR=${INVENTORY_CLUSTER_DIR:-$PWD/.data/cluster-test}
export INVENTORY_CLUSTER_PORT=${INVENTORY_CLUSTER_PORT:-$((31500 + ($(echo "$PWD" | cksum | cut -d' ' -f1) % 60) * 5))}
eval "$(scripts/cluster.sh db | sed 's/^/export /')"
export DATABASE_URL=$INVENTORY_CLUSTER_PRIMARY_URL
export INVENTORY_TEST_POOLED_URL=$INVENTORY_CLUSTER_POOLED_URL
export INVENTORY_TEST_REPLICA_URL=$INVENTORY_CLUSTER_REPLICA_URL
INVENTORY_TEST_RUN=t$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
export INVENTORY_TEST_RUN
# At the end: this run's leftover test databases (an interrupted test's) are
# dropped, and the topology is stopped.
finish() {
  psql "$DATABASE_URL" -Atqc "SELECT 'DROP DATABASE IF EXISTS ' || quote_ident(datname) || ' WITH (FORCE);' FROM pg_database WHERE datname LIKE 'inventory\_test\_${INVENTORY_TEST_RUN}\_%'" \
    | psql "$DATABASE_URL" -q >/dev/null 2>&1 || true
  scripts/cluster.sh stop
}
trap finish EXIT
echo "test-topology: requests through PgBouncer ($INVENTORY_TEST_POOLED_URL), reads on the standby" >&2
# The store package whole: every statement of the store through PgBouncer
# (last unit, lost response, basket orders, codes sold once, expiry races,
# reconciliation, the relay's gap-free numbering across instances).
go test -race -count=1 -timeout 20m ./store/
# Over HTTP, instances through PgBouncer: the two-instance races, expiry,
# the gap-free stream with resume across instances, codes sold once,
# availability on every instance, the end-to-end flow.
go test -race -count=1 -timeout 20m -run '^(TestReserveLastUnitOverHTTP|TestLostResponseOverHTTP|TestTwoInstances|TestStockChangedAcrossInstances|TestStockChangedResume|TestHoldExpiryIsPushed|TestCodesOverHTTP|TestAvailabilitySeqAndETagOnEveryInstance|TestServerEndToEnd|TestCheckoutFlow|TestReconciliationIsBounded)$' ./e2e/
# Faults: kill -9 of an instance under load, and an instance frozen
# (SIGSTOP) inside its relay transaction (the relay's SET LOCAL timeouts end
# its session), through PgBouncer; PgBouncer restarted under load and the
# standby stopped under load (each on a primary, standby and PgBouncer of
# the test's own, which it may stop).
go test -count=1 -timeout 20m -run '^(TestKillInstanceMidReserve|TestKillInstanceMidConfirm|TestPgBouncerRestartUnderLoad|TestStandbyStoppedReadsFallBack|TestFrozenRelayInstanceLosesTheLock)$' -v ./faults/ | grep -E '^(--- |ok|FAIL|PASS|Test[A-Za-z]+: )'
