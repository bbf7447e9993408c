package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"inventory/auth"
	"inventory/codefile"
	"inventory/domain"
	"inventory/store"
)

// tokenCommand implements "token create --role admin|service --name NAME" and
// "token revoke NAME". A new secret is printed once, alone on the last line,
// so scripts can take it with tail -n1; only its hash is stored.
func tokenCommand(ctx context.Context, st *store.Store, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: inventory token create --role admin|service --name NAME | inventory token revoke NAME")
	}
	switch args[0] {
	case "create":
		fs := flag.NewFlagSet("token create", flag.ContinueOnError)
		role := fs.String("role", "", "admin or service")
		name := fs.String("name", "", "a unique name for the key, e.g. checkout-backend")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		secret, hash := auth.NewAPISecret()
		if err := st.APIKeyCreate(ctx, *name, domain.Role(strings.ToUpper(*role)), hash); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "created %s key %q; the secret is shown only now:\n%s\n", strings.ToLower(*role), *name, secret)
		return nil
	case "revoke":
		if len(args) != 2 {
			return errors.New("usage: inventory token revoke NAME")
		}
		if err := st.APIKeyRevoke(ctx, args[1]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked key %q\n", args[1])
		return nil
	default:
		return fmt.Errorf("unknown token command %q: use create or revoke", args[0])
	}
}

// importCommand implements "import --sku S --location L --batch REF FILE"
// ("-" reads standard input): the same import as the importCodes mutation.
func importCommand(ctx context.Context, st *store.Store, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	sku := fs.String("sku", "", "CODES SKU to stock")
	location := fs.String("location", "", "location code")
	batch := fs.String("batch", "", "batch reference; importing it again changes nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: inventory import --sku S --location L --batch REF FILE")
	}
	var src io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	ctx = domain.WithActor(ctx, domain.Actor{Role: domain.RoleAdmin, Name: "cli:import"})
	start := time.Now()
	b, err := st.CodesImport(ctx, domain.ImportCodesInput{SKU: *sku, Location: *location, BatchRef: *batch}, codefile.Lines(src))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "batch %s: received %d, inserted %d, duplicates %d, rejected %d, pre-orders filled %d (%s)\n",
		b.BatchRef, b.Received, b.Inserted, b.Duplicates, b.Rejected, b.PreordersFilled, time.Since(start).Round(time.Millisecond))
	return nil
}

// reconcileCommand prints every invariant that does not hold and fails when
// there is one, so it can gate a deploy or page someone from cron.
func reconcileCommand(ctx context.Context, st *store.Store, stdout io.Writer) error {
	issues, err := st.Reconciliation(ctx)
	if err != nil {
		return err
	}
	for _, i := range issues {
		fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\n", i.Kind, i.SKU, i.Location, i.Detail)
	}
	if len(issues) > 0 {
		return fmt.Errorf("%d reconciliation issues", len(issues))
	}
	fmt.Fprintln(stdout, "consistent: every balance matches its ledger")
	return nil
}

// demoCommand loads a small catalog into a database that has no locations yet,
// so "make run" can be run again without piling up demo stock.
func demoCommand(ctx context.Context, st *store.Store, stdout io.Writer) error {
	locs, err := st.LocationList(ctx)
	if err != nil {
		return err
	}
	if len(locs) > 0 {
		fmt.Fprintln(stdout, "demo: catalog already has locations; nothing loaded")
		return nil
	}
	ctx = domain.WithActor(ctx, domain.Actor{Role: domain.RoleAdmin, Name: "demo"})
	for _, l := range []domain.CreateLocationInput{
		{Code: "AMS", Name: "Amsterdam warehouse", Priority: 1},
		{Code: "BER", Name: "Berlin store", Priority: 2},
	} {
		if _, err := st.LocationCreate(ctx, l); err != nil {
			return err
		}
	}
	skus := []struct {
		domain.CreateSKUInput
		stock map[string]int
	}{
		{domain.CreateSKUInput{Code: "HEADPHONES-BLK", Name: "Over-ear headphones, black", Kind: domain.KindQuantity}, map[string]int{"AMS": 12, "BER": 3}},
		{domain.CreateSKUInput{Code: "HEADPHONES-WHT", Name: "Over-ear headphones, white", Kind: domain.KindQuantity}, map[string]int{"AMS": 5}},
		{domain.CreateSKUInput{Code: "USB-C-CABLE", Name: "USB-C cable, 1 m", Kind: domain.KindQuantity}, map[string]int{"AMS": 200, "BER": 40}},
		{domain.CreateSKUInput{Code: "CONSOLE-X", Name: "Game console X (launch edition)", Kind: domain.KindQuantity}, map[string]int{"AMS": 1}},
		{domain.CreateSKUInput{Code: "GIFTCARD-25", Name: "Gift card, EUR 25", Kind: domain.KindCodes}, nil},
	}
	for _, s := range skus {
		if _, err := st.SKUCreate(ctx, s.CreateSKUInput); err != nil {
			return err
		}
		for loc, q := range s.stock {
			if _, err := st.StockReceive(ctx, domain.ReceiveStockInput{SKU: s.Code, Location: loc, Quantity: q, Reference: "demo"}); err != nil {
				return err
			}
		}
	}
	var codes []string
	for i := range 20 {
		codes = append(codes, fmt.Sprintf("GC25-%02d-%s", i+1, rand.Text()[:12]))
	}
	if _, err := st.CodesImport(ctx, domain.ImportCodesInput{SKU: "GIFTCARD-25", Location: "AMS", BatchRef: "demo"}, codefile.List(codes)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "demo: loaded 2 locations, %d SKUs and 20 gift-card codes\n", len(skus))
	return nil
}
