package cli

import (
	"context"
	"crypto/rand"
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

// tokenCreate makes an admin or service key. A new secret is printed once,
// alone on the last line, so scripts can take it with tail -n1; only its hash
// is stored.
func tokenCreate(ctx context.Context, st *store.Store, role domain.Role, name string, stdout io.Writer) error {
	secret, hash := auth.NewAPISecret()
	if err := st.APIKeyCreate(ctx, name, role, hash); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created %s key %q; the secret is shown only now:\n%s\n", strings.ToLower(string(role)), name, secret)
	return nil
}

// importCodes imports the codes in file ("-": standard input) as the
// importCodes mutation does.
func importCodes(ctx context.Context, st *store.Store, in domain.ImportCodesInput, file string, stdout io.Writer) error {
	var src io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	ctx = domain.WithActor(ctx, domain.Actor{Role: domain.RoleAdmin, Name: "cli:import"})
	start := time.Now()
	b, err := st.CodesImport(ctx, in, codefile.Lines(src))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "batch %s: received %d, inserted %d, duplicates %d, rejected %d, pre-orders filled %d (%s)\n",
		b.BatchRef, b.Received, b.Inserted, b.Duplicates, b.Rejected, b.PreordersFilled, time.Since(start).Round(time.Millisecond))
	return nil
}

// reconcile prints every invariant that does not hold and fails when there is
// one, so it can gate a deploy or page someone from cron.
func reconcile(ctx context.Context, st *store.Store, stdout io.Writer) error {
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

// loadDemo loads a small catalog into a database that has no locations yet,
// so "make run" can be run again without piling up demo stock.
func loadDemo(ctx context.Context, st *store.Store, stdout io.Writer) error {
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
