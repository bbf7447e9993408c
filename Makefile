# The two commands: `make run` serves with a demo catalog, `make test` runs every
# test against a real PostgreSQL. Both find or start PostgreSQL themselves and
# leave a private one running; `make stop` stops it (and make run's server).
.PHONY: run stop test test-topology build generate vet bench bench-smoke fuzz soak cluster

run:
	scripts/run.sh

stop:
	scripts/stop.sh

test:
	scripts/test.sh

# The scale-out guarantees against that topology (CI runs it after test).
test-topology:
	scripts/test-topology.sh

# The production topology on this machine: a primary, a streaming standby,
# PgBouncer in transaction mode and three instances; Ctrl-C stops it all.
cluster:
	scripts/cluster.sh

# The version and commit that inventory version prints.
LDFLAGS = -X inventory/cli.version=$(shell git describe --tags --always --dirty 2>/dev/null || echo devel) -X inventory/cli.commit=$(shell git rev-parse HEAD 2>/dev/null)

build:
	go build -ldflags "$(LDFLAGS)" -o bin/inventory .

generate:
	go generate ./...

vet:
	go vet ./...

# Every fuzz target for a budget of executions (scripts/fuzz.sh); CI runs it too.
fuzz:
	scripts/fuzz.sh

# End to end: its own database, the real server binary on a loopback port, and
# pgbench running the same statements as a baseline, interleaved per client
# count (availability also next to a minimal net/http "ceiling" handler, the
# write rows next to a "naive" net/http + pgxpool server, with the CPU each
# side used per 1,000 holds); plus an expiry storm and the subscriber fan-out
# rows. About 12 minutes; the table and an SVG chart go to bench/results/.
# bench-smoke runs every scenario for about a second at tiny sizes (CI runs it
# so the benchmark cannot rot).
bench:
	go build -o bin/inventory . && go build -o bin/bench ./bench
	DATABASE_URL=$$(scripts/pgup.sh) bin/bench

bench-smoke:
	go build -o bin/inventory . && go build -o bin/bench ./bench
	DATABASE_URL=$$(scripts/pgup.sh) bin/bench -smoke

# Soak (not in CI): 10 minutes of mixed load against the real server binary;
# its RSS and goroutines, sampled every 5 s, must stay flat (bench/results/soak.csv).
soak:
	go build -o bin/inventory . && go build -o bin/bench ./bench
	DATABASE_URL=$$(scripts/pgup.sh) bin/bench -soak
