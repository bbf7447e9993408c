# The two commands: `make run` serves with a demo catalog, `make test` runs every
# test against a real PostgreSQL. Both find or start PostgreSQL themselves.
.PHONY: run test build generate vet bench

run:
	scripts/run.sh

test:
	scripts/test.sh

build:
	go build -o bin/inventory .

generate:
	go generate ./...

vet:
	go vet ./...

# Side-by-side throughput of the write paths (flash sale vs spread, batched vs
# per-write NOTIFY), printed as ratios. Takes about a minute.
bench:
	DATABASE_URL=$$(scripts/pgup.sh) go run ./bench
