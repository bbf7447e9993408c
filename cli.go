package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"inventory/auth"
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
	fmt.Fprintf(stdout, "demo: loaded 2 locations and %d SKUs\n", len(skus))
	return nil
}
