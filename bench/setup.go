package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
)

// setUp makes what the benchmark and the soak both run against: a database of
// their own (migrated by the server binary, seeded with the catalog), admin and
// service keys, the CODES stock, the server itself on a loopback port (logging
// to <name>-server.log, or server.log for the benchmark), a GraphQL client for
// httpClients concurrent clients and checkout tokens for shoppers of them.
// cleanup stops the server and drops the database.
func setUp(ctx context.Context, o options, name string, httpClients, shoppers int) (b *bench, cleanup func(), err error) {
	adminURL := os.Getenv("DATABASE_URL")
	if adminURL == "" {
		return nil, nil, fmt.Errorf("DATABASE_URL is required (make %s sets it with scripts/pgup.sh)", name)
	}
	if _, err := os.Stat(o.bin); err != nil {
		return nil, nil, fmt.Errorf("server binary: %w (go build -o bin/inventory .)", err)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, nil, fmt.Errorf("results dir: %w", err)
	}
	var undo []func()
	undoAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	// Not the named result: an error return sets that to nil before this
	// runs (a server that failed to start made the bench panic here).
	defer func() {
		if err != nil {
			undoAll()
		}
	}()
	tmp, err := os.MkdirTemp("", "inventory-"+name+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("temp dir: %w", err)
	}
	undo = append(undo, func() { os.RemoveAll(tmp) })
	dbURL, drop, err := createDatabase(ctx, adminURL)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, drop)
	b = &bench{opts: o, dbURL: dbURL, sqlDir: tmp}
	env := serverEnv(dbURL, o.maxConns, o.pprofAddr)
	b.env = env
	if _, err := cli(ctx, o.bin, env, "migrate"); err != nil {
		return nil, nil, err
	}
	if b.pool, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, nil, fmt.Errorf("connect to %s database: %w", name, err)
	}
	undo = append(undo, b.pool.Close)
	if b.cat, err = seed(ctx, b.pool); err != nil {
		return nil, nil, err
	}
	if b.adminKey, err = createKey(ctx, o.bin, env, "admin", name+"-admin"); err != nil {
		return nil, nil, err
	}
	if b.serviceKey, err = createKey(ctx, o.bin, env, "service", name+"-service"); err != nil {
		return nil, nil, err
	}
	if err := b.importCodes(ctx, env, tmp); err != nil {
		return nil, nil, err
	}
	logName := name + "-server.log"
	if name == "bench" {
		logName = "server.log"
	}
	if b.srv, err = startServer(ctx, o.bin, env, filepath.Join(o.out, logName)); err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() {
		if err := b.srv.stop(); err != nil {
			logf("%v", err)
		}
	})
	logf("%s: server %s (pid %d) on database %s", name, b.srv.URL, b.srv.cmd.Process.Pid, dbName(dbURL))
	b.gql = newGQLClient(b.srv.URL, httpClients)
	if b.shoppers, err = newShoppers(env, shoppers); err != nil {
		return nil, nil, err
	}
	return b, undoAll, nil
}
