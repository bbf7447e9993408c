// Package faults is a fault-injection harness: its tests build the real
// server binary, run it as child processes against a real PostgreSQL, inject
// faults while clients reserve stock — an instance killed with SIGKILL, every
// server connection terminated by PostgreSQL, a PostgreSQL restart, River's
// workers stopped on every instance — and then check in SQL that nothing
// acknowledged was lost, nothing was done twice or half, and the stock
// reconciles. Each test prints what it injected and what it verified.
//
// The package has no code of its own; everything is in its tests:
//
//	go test -race -count=1 -v ./faults/
//
// DATABASE_URL (scripts/pgup.sh) names a server on which the tests create
// databases of their own; the restart test creates a private cluster with
// initdb, the only PostgreSQL it ever restarts.
package faults
