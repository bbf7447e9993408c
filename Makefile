# The two commands: `make run` serves with a demo catalog, `make test` runs every
# test against a real PostgreSQL. Both find or start PostgreSQL themselves.
.PHONY: run test build generate vet

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
