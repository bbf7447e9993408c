package store_test

import (
	"strings"
	"testing"

	"inventory/domain"
)

func TestLocationCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)

	loc, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam", Priority: 2})
	if err != nil {
		t.Fatal(err)
	}
	if loc != (domain.Location{Code: "AMS", Name: "Amsterdam", Priority: 2, Fulfillment: domain.FulfillOnConfirm}) {
		t.Fatalf("got %+v, want the default ON_CONFIRM", loc)
	}
	_, err = b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: "AMS", Name: "Other"})
	requireCode(t, err, domain.CodeAlreadyExists)

	for _, in := range []domain.CreateLocationInput{
		{Code: "", Name: "x"},
		{Code: strings.Repeat("L", 129), Name: "x"},
		{Code: "tab\there", Name: "x"},
		{Code: "OK", Name: "  "},
		{Code: "OK", Name: "x", Priority: domain.MaxPriority + 1},
		{Code: "OK", Name: "x", Fulfillment: "ON_DELIVERY"},
	} {
		_, err := b.Store.LocationCreate(b.Ctx, in)
		requireCode(t, err, domain.CodeInvalidInput)
	}
	locs, err := b.Store.LocationList(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(locs) != 1 || locs[0].Name != "Amsterdam" {
		t.Fatalf("refused creates changed the catalog: %+v", locs)
	}
	wh, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: "WH", Name: "Warehouse", Fulfillment: domain.FulfillOnShipment})
	if err != nil || wh.Fulfillment != domain.FulfillOnShipment {
		t.Fatalf("ON_SHIPMENT location: %+v %v", wh, err)
	}
	if locs, err = b.Store.LocationList(b.Ctx); err != nil || len(locs) != 2 || locs[0].Fulfillment != domain.FulfillOnShipment {
		t.Fatalf("listed: %+v %v, want WH (priority 0) first, ON_SHIPMENT", locs, err)
	}
	// 128 characters is the documented maximum and is accepted.
	if _, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: strings.Repeat("é", 128), Name: "long"}); err != nil {
		t.Fatalf("128-character code refused: %v", err)
	}
}

func requireCode(t *testing.T, err error, code domain.ErrorCode) *domain.Error {
	t.Helper()
	e, ok := domain.AsError(err)
	if !ok {
		t.Fatalf("want a %s business error, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want %s, got %s (%s)", code, e.Code, e.Message)
	}
	return e
}

func TestSKUCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)

	for _, in := range []domain.CreateSKUInput{
		{Code: "HEADPHONES", Name: "Headphones", Kind: domain.KindQuantity},
		{Code: "GIFTCARD-25", Name: "Gift card €25", Kind: domain.KindCodes},
	} {
		sku, err := b.Store.SKUCreate(b.Ctx, in)
		if err != nil {
			t.Fatalf("SKUCreate(%+v): %v", in, err)
		}
		if sku.Code != in.Code || sku.Name != in.Name || sku.Kind != in.Kind {
			t.Fatalf("SKUCreate(%+v) returned %+v", in, sku)
		}
		if sku.Balances == nil || len(sku.Balances) != 0 {
			t.Fatalf("a new SKU must have an empty, non-nil Balances slice, got %#v", sku.Balances)
		}
		got, err := b.Store.SKUGetByCode(b.Ctx, in.Code)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || got.Code != in.Code || got.Name != in.Name || got.Kind != in.Kind || len(got.Balances) != 0 {
			t.Fatalf("SKUGetByCode(%q) after create = %+v", in.Code, got)
		}
	}
	var kinds []string
	if err := b.Pool.QueryRow(b.Ctx, `SELECT array_agg(kind ORDER BY code) FROM skus`).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 2 || kinds[0] != "codes" || kinds[1] != "quantity" {
		t.Fatalf("stored kinds %v, want [codes quantity]", kinds)
	}

	// The code is taken whatever the kind or name.
	_, err := b.Store.SKUCreate(b.Ctx, domain.CreateSKUInput{Code: "HEADPHONES", Name: "Other", Kind: domain.KindCodes})
	requireCode(t, err, domain.CodeAlreadyExists)

	for _, in := range []domain.CreateSKUInput{
		{Code: "", Name: "x", Kind: domain.KindQuantity},
		{Code: strings.Repeat("S", 129), Name: "x", Kind: domain.KindQuantity},
		{Code: "OK", Name: "", Kind: domain.KindQuantity},
		{Code: "OK", Name: " \t ", Kind: domain.KindQuantity},
		{Code: "OK", Name: "x", Kind: "BUNDLE"},
		{Code: "OK", Name: "x", Kind: ""},
		{Code: "OK", Name: "x", Kind: "quantity"},
	} {
		_, err := b.Store.SKUCreate(b.Ctx, in)
		requireCode(t, err, domain.CodeInvalidInput)
	}
	var n int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM skus`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("refused creates changed the catalog: %d SKUs, want 2", n)
	}
	got, err := b.Store.SKUGetByCode(b.Ctx, "HEADPHONES")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Headphones" || got.Kind != domain.KindQuantity {
		t.Fatalf("ALREADY_EXISTS overwrote the SKU: %+v", got)
	}
	// 128 characters is the documented maximum and is accepted.
	if _, err := b.Store.SKUCreate(b.Ctx, domain.CreateSKUInput{Code: strings.Repeat("é", 128), Name: "long", Kind: domain.KindQuantity}); err != nil {
		t.Fatalf("128-character code refused: %v", err)
	}
}

func TestSKUGetByCode(t *testing.T) {
	t.Parallel()
	b := setup(t)

	got, err := b.Store.SKUGetByCode(b.Ctx, "NOPE")
	if err != nil || got != nil {
		t.Fatalf("unknown SKU: got %+v, %v; want nil, nil", got, err)
	}

	// Created in the opposite of sourcing order: priority decides, then code.
	mustLocation(t, b, "ZRH", 5)
	mustLocation(t, b, "BER", 1)
	mustLocation(t, b, "AMS", 5)
	mustSKU(t, b, "HEADPHONES", domain.KindQuantity)
	mustSKU(t, b, "OTHER", domain.KindQuantity)
	mustReceive(t, b, "HEADPHONES", "ZRH", 3)
	mustReceive(t, b, "HEADPHONES", "BER", 7)
	mustReceive(t, b, "OTHER", "AMS", 11) // must not show up under HEADPHONES

	got, err = b.Store.SKUGetByCode(b.Ctx, "HEADPHONES")
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("known SKU returned nil")
	}
	if got.Code != "HEADPHONES" || got.Name != "SKU HEADPHONES" || got.Kind != domain.KindQuantity {
		t.Fatalf("got %+v", got)
	}
	if len(got.Balances) != 2 {
		t.Fatalf("want 2 balances, got %+v", got.Balances)
	}
	want := []struct {
		loc    string
		onHand int
	}{{"BER", 7}, {"ZRH", 3}}
	for i, w := range want {
		bal := got.Balances[i]
		if bal.SKU != "HEADPHONES" || bal.Location != w.loc || bal.OnHand != w.onHand || bal.Reserved != 0 ||
			bal.PendingSupply != 0 || bal.Preordered != 0 || bal.UpdatedAt.IsZero() {
			t.Fatalf("balance %d = %+v, want HEADPHONES@%s on hand %d", i, bal, w.loc, w.onHand)
		}
	}

	// A third location with the same priority as ZRH sorts by code.
	mustReceive(t, b, "HEADPHONES", "AMS", 1)
	got, err = b.Store.SKUGetByCode(b.Ctx, "HEADPHONES")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, bal := range got.Balances {
		order = append(order, bal.Location)
	}
	if strings.Join(order, ",") != "BER,AMS,ZRH" {
		t.Fatalf("balances in order %v, want BER,AMS,ZRH", order)
	}
}
