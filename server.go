// Command inventory is the inventory reservation server and its CLI:
//
//	inventory [serve]                          run the GraphQL server
//	inventory migrate [status]                 apply (or list) database migrations
//	inventory token create --role R --name N   create an admin/service key (secret on the last line)
//	inventory token revoke NAME                revoke a key
//	inventory import --sku S --location L --batch REF FILE   import codes for a CODES SKU
//	inventory stock import [--reference R] FILE.csv   set on-hand counts from a CSV
//	inventory codes rekey                      re-seal codes under the current key
//	inventory reconcile                        report stock invariants that do not hold
//	inventory demo                             load the demo catalog into an empty database
//	inventory settings                         every setting, as docs/configuration.md
//	inventory version                          print the build's version and commit
//	inventory help [COMMAND], COMMAND -h       usage; touches nothing
//
// Configuration comes from the environment (docs/configuration.md). The
// commands are in package cli, the server's wiring in package app.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"inventory/cli"
)

//go:generate go tool gqlgen generate --config gqlgen.yml
//go:generate sh -c "go run . settings > docs/configuration.md"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
