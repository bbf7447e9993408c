package store_test

import (
	"testing"
	"time"

	"inventory/domain"
)

func TestReservationLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 5)

	res := b.reserve(t, "cart-1", "k1", "HP", ptr("AMS"), 2, 900)
	if res.Status != domain.StatusHeld || len(res.Lines) != 1 || res.Lines[0].Quantity != 2 || time.Until(res.ExpiresAt) < 890*time.Second {
		t.Fatalf("reserve: %+v", res)
	}
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 5 || rsv != 2 {
		t.Fatalf("after reserve: on_hand %d reserved %d", on, rsv)
	}
	var jobs int
	if err := b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry' AND args->>'reservation_id' = $1 AND scheduled_at = $2`,
		res.ID, res.ExpiresAt).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("expiry job: %d %v", jobs, err)
	}

	confirmed, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-1",
		Lines: []domain.OrderLineSnapshot{{SKU: "HP", Title: ptr("Headphones"), UnitPrice: ptr("19.99"), Currency: ptr("EUR")}}})
	if err != nil {
		t.Fatal(err)
	}
	if confirmed.Status != domain.StatusConfirmed || confirmed.Order == nil || confirmed.Order.Ref != "ORD-1" ||
		len(confirmed.Order.Lines) != 1 || *confirmed.Order.Lines[0].UnitPrice != "19.99" {
		t.Fatalf("confirm: %+v %+v", confirmed, confirmed.Order)
	}
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 3 || rsv != 0 {
		t.Fatalf("after confirm: on_hand %d reserved %d", on, rsv)
	}
	// Confirming again with the same orderRef is the same result.
	again, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-1"})
	if err != nil || again.Status != domain.StatusConfirmed || again.Order.Ref != "ORD-1" {
		t.Fatalf("repeat confirm: %+v %v", again, err)
	}
	_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: "ORD-2"})
	requireCode(t, err, domain.CodeInvalidTransition)
	_, err = b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonOther})
	requireCode(t, err, domain.CodeInvalidTransition)
	_, err = b.Store.ReservationExtend(b.Ctx, domain.Scope{}, domain.ExtendInput{ID: res.ID, TTLSeconds: 60})
	requireCode(t, err, domain.CodeInvalidTransition)

	// Release, and release again.
	r2 := b.reserve(t, "cart-1", "k2", "HP", ptr("AMS"), 3, 900)
	for range 2 {
		rel, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: r2.ID, Reason: domain.ReasonPaymentFailed})
		if err != nil || rel.Status != domain.StatusReleased || *rel.ReleaseReason != domain.ReasonPaymentFailed {
			t.Fatalf("release: %+v %v", rel, err)
		}
	}
	_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: r2.ID, OrderRef: "ORD-3"})
	requireCode(t, err, domain.CodeInvalidTransition)
	if on, rsv := b.Balance(t, "HP", "AMS"); on != 3 || rsv != 0 {
		t.Fatalf("after release: on_hand %d reserved %d", on, rsv)
	}

	// Another checkout's scope cannot see or touch it.
	other := domain.Scope{CheckoutID: "cart-2"}
	got, err := b.Store.ReservationGetByID(b.Ctx, other, r2.ID)
	if err != nil || got != nil {
		t.Fatalf("other checkout read: %+v %v", got, err)
	}
	_, err = b.Store.ReservationRelease(b.Ctx, other, domain.ReleaseInput{ID: r2.ID, Reason: domain.ReasonOther})
	requireCode(t, err, domain.CodeNotFound)
	order, err := b.Store.OrderGetByRef(b.Ctx, other, "ORD-1")
	if err != nil || order != nil {
		t.Fatalf("other checkout order: %+v %v", order, err)
	}
	order, err = b.Store.OrderGetByRef(b.Ctx, domain.Scope{CheckoutID: "cart-1"}, "ORD-1")
	if err != nil || order == nil || order.CheckoutID != "cart-1" {
		t.Fatalf("own order: %+v %v", order, err)
	}
	list, err := b.Store.ReservationListByCheckout(b.Ctx, "cart-1", domain.ReservationPage{First: 50})
	if err != nil || len(list) != 2 || list[0].ID != r2.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	b.requireInvariants(t)

	h, err := b.Store.InventoryHealthGet(b.Ctx)
	if err != nil || h.HeldReservations != 0 || len(h.HeldByAge) != 5 {
		t.Fatalf("health: %+v %v", h, err)
	}
}

func TestReserveIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Stock(t, "HP", "AMS", 1)

	first := b.reserve(t, "cart-1", "k", "HP", ptr("AMS"), 1, 900)
	// The lost response: the same request again, now that no stock is left.
	again, replayed, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-1", RequestKey: "k", TTLSeconds: 900,
		Lines: []domain.ReserveLine{{SKU: "HP", Location: ptr("AMS"), Quantity: 1}}})
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("replay: %+v %v %v", again, replayed, err)
	}
	if _, rsv := b.Balance(t, "HP", "AMS"); rsv != 1 {
		t.Fatalf("reserved %d after replay", rsv)
	}
	_, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-1", RequestKey: "k", TTLSeconds: 900,
		Lines: []domain.ReserveLine{{SKU: "HP", Location: ptr("AMS"), Quantity: 2}}})
	requireCode(t, err, domain.CodeIdempotencyKeyReused)
	// The same key under another checkout is another request.
	_, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-2", RequestKey: "k", TTLSeconds: 900,
		Lines: []domain.ReserveLine{{SKU: "HP", Location: ptr("AMS"), Quantity: 1}}})
	e := requireCode(t, err, domain.CodeOutOfStock)
	if *e.Available != 0 || *e.Line != 0 || e.SKU != "HP" {
		t.Fatalf("out of stock: %+v", e)
	}
	b.requireInvariants(t)
}
