package store_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"

	"inventory/domain"
	"inventory/pgtest"
	"inventory/testkit"
)

// FuzzListCursors: against a real database holding one reservation R of
// checkout "fuzz-cart", any string as
//   - balances' after is a page or BAD_REQUEST (*domain.LimitError), never
//     another error;
//   - checkoutReservations' after is an empty page exactly when it spells R
//     (uuid.Parse), else BAD_REQUEST — never another error;
//   - reservation(id) is R exactly when it spells R, else nothing, never an
//     error;
//   - a release's id, outside the caller's scope, is NOT_FOUND with a short
//     message, never another error (and R is left held).
func FuzzListCursors(f *testing.F) {
	pool := pgtest.NewPool(f)
	s := testkit.NewStore(f, pool)
	ctx := domain.WithActor(context.Background(), domain.Actor{Role: domain.RoleAdmin, Name: "fuzz-admin"})
	if _, err := s.LocationCreate(ctx, domain.CreateLocationInput{Code: "AMS", Name: "Amsterdam"}); err != nil {
		f.Fatal(err)
	}
	for _, sku := range []string{"SKU-1", "SKU-2"} {
		if _, err := s.SKUCreate(ctx, domain.CreateSKUInput{Code: sku, Name: sku, Kind: domain.KindQuantity}); err != nil {
			f.Fatal(err)
		}
		if _, err := s.StockReceive(ctx, domain.ReceiveStockInput{SKU: sku, Location: "AMS", Quantity: 5, Reference: "fuzz"}); err != nil {
			f.Fatal(err)
		}
	}
	res, _, err := s.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: "fuzz-cart", RequestKey: "k", TTLSeconds: domain.MaxHoldTTL,
		Lines: []domain.ReserveLine{{SKU: "SKU-1", Quantity: 1}}})
	if err != nil {
		f.Fatal(err)
	}
	r := uuid.MustParse(res.ID)

	for _, seed := range []string{
		"", res.ID, strings.ToUpper(res.ID), "{" + res.ID + "}", strings.ReplaceAll(res.ID, "-", ""),
		uuid.Nil.String(), "00000000-0000-0000-0000-00000000000G", "00000000-0000-0000-0000-0000000000000",
		"a0eebc99-9c0b4ef8-bb6d6bb9-bd380a11", "U0tVLTEAQU1T", "U0tVLTI", "QQ", "not a cursor", "\xff\x00",
		"' OR 1=1 --", strings.Repeat("9", 4096), "urn:uuid:" + res.ID, "URN:UUID:" + uuid.Nil.String(),
		base64.RawURLEncoding.EncodeToString([]byte("SKU-1\x00AMS\x00x")), base64.RawURLEncoding.EncodeToString([]byte("SKU-\xff\x00AMS")),
	} {
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, after string) {
		if _, err := s.BalanceList(ctx, after, 1); err != nil && !isLimit(err) {
			t.Fatalf("BalanceList(after: %q): %v; want a page or BAD_REQUEST", after, err)
		}

		parsed, perr := uuid.Parse(after)
		isR := perr == nil && parsed == r
		page, err := s.ReservationListByCheckout(ctx, "fuzz-cart", domain.ReservationPage{First: 10, After: &after})
		switch {
		case isR && (err != nil || len(page) != 0):
			t.Fatalf("after %q (the only reservation): %d reservations, %v; want none", after, len(page), err)
		case !isR && (err == nil || !isLimit(err)):
			t.Fatalf("after %q: %d reservations, %v; want BAD_REQUEST", after, len(page), err)
		case err != nil && utf8.RuneCountInString(after) > domain.MaxIdentifierLength && strings.Contains(err.Error(), after):
			t.Fatalf("the error %q quotes the cursor", err)
		}

		got, err := s.ReservationGetByID(ctx, domain.Scope{}, after)
		if err != nil || (got != nil) != isR || (got != nil && got.ID != res.ID) {
			t.Fatalf("ReservationGetByID(%q) = %v, %v; want R exactly when it spells R", after, got, err)
		}

		_, err = s.ReservationRelease(ctx, domain.Scope{CheckoutID: "someone-else"}, domain.ReleaseInput{ID: after, Reason: domain.ReasonOther})
		e, ok := domain.AsError(err)
		if !ok || e.Code != domain.CodeNotFound {
			t.Fatalf("release of %q out of scope: %v; want NOT_FOUND", after, err)
		}
		if len(e.Message) > 200 {
			t.Fatalf("NOT_FOUND message of %d bytes quotes the id back", len(e.Message))
		}
	})
}

func isLimit(err error) bool {
	var e *domain.LimitError
	return errors.As(err, &e)
}
