package store_test

import (
	"testing"

	"inventory/codecrypt"
	"inventory/codefile"
	"inventory/domain"
)

// Every kind of balance change writes exactly one stock_events row, in the
// transaction that made the change, carrying the balance after it: receive,
// adjust, reserve, confirm, release, expire (by its job and by the sweeper,
// which ends several holds of one balance in one transaction), import of
// codes, pre-order allocation (on receive, on import and on a confirm that
// finds stock), and setPreorder (cause adjusted). A call that changes two
// balances writes one event for each.
func TestStockEventsOnePerBalanceChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keys, err := codecrypt.ParseKeyring("k1:"+codecrypt.NewKey(), codecrypt.NewKey())
	if err != nil {
		t.Fatalf("ParseKeyring: %v", err)
	}
	b.Store.Keyring = keys
	b.Catalog(t, domain.KindQuantity, []string{"EQ"}, "EL", "EL2")
	b.Catalog(t, domain.KindCodes, []string{"EC"}, "EL")
	if n := b.evtMaxID(t); n != 0 {
		t.Fatalf("creating locations and SKUs wrote %d events", n)
	}

	var resA, resB, resC, resD, resE, resF, resG, resH domain.Reservation
	reserve := func(res *domain.Reservation, checkout string, lines ...domain.ReserveLine) func() error {
		return func() error {
			var err error
			*res, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: checkout, RequestKey: "k", TTLSeconds: 600, Lines: lines})
			return err
		}
	}
	at := func(sku, loc string, q int) domain.ReserveLine {
		return domain.ReserveLine{SKU: sku, Location: &loc, Quantity: q}
	}
	confirm := func(res *domain.Reservation, ref string) func() error {
		return func() error {
			_, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: res.ID, OrderRef: ref})
			return err
		}
	}
	release := func(res *domain.Reservation) func() error {
		return func() error {
			_, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: res.ID, Reason: domain.ReasonCustomerCancelled})
			return err
		}
	}
	receive := func(sku, loc string, q int) func() error {
		return func() error {
			_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: sku, Location: loc, Quantity: q, Reference: nextRef("PO")})
			return err
		}
	}
	adjust := func(sku, loc string, delta int) func() error {
		return func() error {
			_, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: sku, Location: loc, Delta: delta, Reason: "count", Reference: nextRef("C")})
			return err
		}
	}
	preorderSet := func(sku, loc string, pending int) func() error {
		return func() error {
			_, err := b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: sku, Location: loc, PendingSupply: pending})
			return err
		}
	}
	importCodes := func(sku, loc, ref string, codes ...string) func() error {
		return func() error {
			_, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: sku, Location: loc, BatchRef: ref}, codefile.List(codes))
			return err
		}
	}
	overdue := func(res ...*domain.Reservation) {
		t.Helper()
		for i, r := range res {
			// Earlier reservations fall due first, so the sweeper ends them
			// in this order.
			if _, err := b.Pool.Exec(b.Ctx, `UPDATE reservations SET expires_at = now() - make_interval(mins => 10 - $2) WHERE id = $1`,
				r.ID, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := func(res *domain.Reservation, c string) func(string, string, string, int, int) evtWant {
		return func(sku, loc, cause string, onHand, reserved int) evtWant {
			return evtWant{SKU: sku, Location: loc, Cause: cause, OnHand: onHand, Reserved: reserved, Res: res, Checkout: c}
		}
	}
	plain := func(sku, loc, cause string, onHand, reserved int) evtWant {
		return evtWant{SKU: sku, Location: loc, Cause: cause, OnHand: onHand, Reserved: reserved}
	}

	// Pre-orders of a QUANTITY SKU: setPreorder is an adjustment, reserving
	// and confirming a pre-order changes neither on_hand nor reserved but is
	// still one event each, and arriving stock fills confirmed pre-orders.
	b.evtStep(t, "setPreorder 4", preorderSet("EQ", "EL", 4), plain("EQ", "EL", "adjusted", 0, 0))
	b.evtStep(t, "reserve A (pre-order 2)", reserve(&resA, "cart-a", at("EQ", "EL", 2)), held(&resA, "cart-a")("EQ", "EL", "reserved", 0, 0))
	b.evtStep(t, "confirm A", confirm(&resA, "ORD-A"), held(&resA, "cart-a")("EQ", "EL", "confirmed", 0, 0))
	b.evtStep(t, "reserve B (pre-order 1)", reserve(&resB, "cart-b", at("EQ", "EL", 1)), held(&resB, "cart-b")("EQ", "EL", "reserved", 0, 0))
	b.evtStep(t, "receive 3 with A's pre-order waiting", receive("EQ", "EL", 3),
		plain("EQ", "EL", "received", 3, 0),
		plain("EQ", "EL", "preorder_allocated", 1, 0),
		plain("EQ", "EL", "adjusted", 1, 0)) // the spare unit arrived: one less expected
	b.evtStep(t, "confirm B, which finds stock for its pre-order", confirm(&resB, "ORD-B"),
		held(&resB, "cart-b")("EQ", "EL", "confirmed", 1, 0),
		plain("EQ", "EL", "preorder_allocated", 0, 0))

	// Plain stock.
	b.evtStep(t, "receive 5", receive("EQ", "EL", 5), plain("EQ", "EL", "received", 5, 0))
	b.evtStep(t, "adjust -1", adjust("EQ", "EL", -1), plain("EQ", "EL", "adjusted", 4, 0))
	b.evtStep(t, "adjust +2", adjust("EQ", "EL", 2), plain("EQ", "EL", "adjusted", 6, 0))
	b.evtStep(t, "receive 2 at EL2", receive("EQ", "EL2", 2), plain("EQ", "EL2", "received", 2, 0))

	// Holds: reserve, release, expire by job, expire by the sweeper, confirm.
	b.evtStep(t, "reserve C", reserve(&resC, "cart-c", at("EQ", "EL", 3)), held(&resC, "cart-c")("EQ", "EL", "reserved", 6, 3))
	b.evtStep(t, "release C", release(&resC), held(&resC, "cart-c")("EQ", "EL", "released", 6, 0))
	b.evtStep(t, "reserve D", reserve(&resD, "cart-d", at("EQ", "EL", 2)), held(&resD, "cart-d")("EQ", "EL", "reserved", 6, 2))
	b.evtStep(t, "reserve E", reserve(&resE, "cart-e", at("EQ", "EL", 1)), held(&resE, "cart-e")("EQ", "EL", "reserved", 6, 3))
	b.evtStep(t, "reserve F", reserve(&resF, "cart-f", at("EQ", "EL", 2)), held(&resF, "cart-f")("EQ", "EL", "reserved", 6, 5))
	overdue(&resD)
	b.evtStep(t, "expire D (its job)", func() error {
		notBefore, _, err := b.Store.ReservationExpire(b.Ctx, resD.ID)
		if err == nil && notBefore != nil {
			t.Fatalf("ReservationExpire of an overdue hold snoozed until %v", notBefore)
		}
		return err
	}, held(&resD, "cart-d")("EQ", "EL", "expired", 6, 3))
	overdue(&resE, &resF)
	b.evtStep(t, "sweep E and F (one transaction, one balance)", func() error {
		n, err := b.Store.ReservationSweepOverdue(b.Ctx, 0, 10)
		if err == nil && n != 2 {
			t.Fatalf("sweeper expired %d holds, want 2", n)
		}
		return err
	},
		held(&resE, "cart-e")("EQ", "EL", "expired", 6, 2),
		held(&resF, "cart-f")("EQ", "EL", "expired", 6, 0))
	b.evtStep(t, "reserve G", reserve(&resG, "cart-g", at("EQ", "EL", 1)), held(&resG, "cart-g")("EQ", "EL", "reserved", 6, 1))
	b.evtStep(t, "confirm G", confirm(&resG, "ORD-G"), held(&resG, "cart-g")("EQ", "EL", "confirmed", 5, 0))

	// A basket over two balances: one event per balance, in one transaction.
	b.evtStep(t, "reserve H at EL and EL2", reserve(&resH, "cart-h", at("EQ", "EL2", 1), at("EQ", "EL", 2)),
		held(&resH, "cart-h")("EQ", "EL", "reserved", 5, 2),
		held(&resH, "cart-h")("EQ", "EL2", "reserved", 2, 1))
	b.evtStep(t, "release H", release(&resH),
		held(&resH, "cart-h")("EQ", "EL", "released", 5, 0),
		held(&resH, "cart-h")("EQ", "EL2", "released", 2, 0))

	// Codes: an import is one event; an import that fills a pre-order is
	// the import and the allocation.
	b.evtStep(t, "import 3 codes", importCodes("EC", "EL", "B1", "EVT-0001", "EVT-0002", "EVT-0003"),
		plain("EC", "EL", "imported", 3, 0))
	var resI domain.Reservation
	b.evtStep(t, "reserve I (2 codes)", reserve(&resI, "cart-i", at("EC", "EL", 2)), held(&resI, "cart-i")("EC", "EL", "reserved", 3, 2))
	b.evtStep(t, "confirm I", confirm(&resI, "ORD-I"), held(&resI, "cart-i")("EC", "EL", "confirmed", 1, 0))
	b.evtStep(t, "setPreorder EC 3", preorderSet("EC", "EL", 3), plain("EC", "EL", "adjusted", 1, 0))
	var resJ domain.Reservation
	b.evtStep(t, "reserve J (1 code, 2 pre-ordered)", reserve(&resJ, "cart-j", at("EC", "EL", 3)), held(&resJ, "cart-j")("EC", "EL", "reserved", 1, 1))
	b.evtStep(t, "confirm J", confirm(&resJ, "ORD-J"), held(&resJ, "cart-j")("EC", "EL", "confirmed", 0, 0))
	b.evtStep(t, "import 3 codes with 2 pre-ordered", importCodes("EC", "EL", "B2", "EVT-0004", "EVT-0005", "EVT-0006"),
		plain("EC", "EL", "imported", 3, 0),
		plain("EC", "EL", "preorder_allocated", 1, 0),
		plain("EC", "EL", "adjusted", 1, 0)) // the third code was the last expected one

	// Every event of the test, all unpublished, and the ledger agrees.
	all := b.evtRowsAfter(t, 0)
	for _, e := range all {
		if e.Seq != nil {
			t.Fatalf("event %v has a seq without a relay", e)
		}
	}
	issues, err := b.Store.Reconciliation(b.Ctx)
	if err != nil || len(issues) != 0 {
		t.Fatalf("Reconciliation: %+v %v", issues, err)
	}
	if len(all) != 36 {
		t.Fatalf("%d events in all, want the 36 checked one by one", len(all))
	}
}

// A refused call writes no event: stock, reservation, transition, pre-order
// and import refusals, a replayed reservation, an expiry job that runs before
// the deadline, and an import that inserted nothing.
func TestStockEventsRefusedCallsWriteNone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keys, err := codecrypt.ParseKeyring("k1:"+codecrypt.NewKey(), codecrypt.NewKey())
	if err != nil {
		t.Fatalf("ParseKeyring: %v", err)
	}
	b.Store.Keyring = keys
	b.Catalog(t, domain.KindQuantity, []string{"RQ", "RQ2"}, "RL", "RL2")
	b.Catalog(t, domain.KindCodes, []string{"RC"}, "RL")
	mustOK := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "RQ", Location: "RL", Quantity: 5, Reference: "PO"})
	mustOK("receive", err)
	_, err = b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "RQ2", Location: "RL2", Quantity: 1, Reference: "PO"})
	mustOK("receive", err)
	rl := "RL"
	rl2 := "RL2"
	held, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-1", RequestKey: "k1", TTLSeconds: 600,
		Lines: []domain.ReserveLine{{SKU: "RQ", Location: &rl, Quantity: 3}}})
	mustOK("reserve", err)
	sold, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-2", RequestKey: "k1", TTLSeconds: 600,
		Lines: []domain.ReserveLine{{SKU: "RQ", Location: &rl, Quantity: 1}}})
	mustOK("reserve", err)
	_, err = b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: sold.ID, OrderRef: "ORD-1"})
	mustOK("confirm", err)
	_, err = b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "RC", Location: "RL", BatchRef: "B1"}, codefile.List([]string{"REF-0001"}))
	mustOK("import", err)
	_, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-3", RequestKey: "k1", TTLSeconds: 600,
		Lines: []domain.ReserveLine{{SKU: "RQ2", Location: &rl2, Quantity: 1}}})
	mustOK("reserve", err)
	_, err = b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: "RQ2", Location: "RL2", PendingSupply: 2})
	mustOK("setPreorder", err)
	_, _, err = b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-4", RequestKey: "k1", TTLSeconds: 600,
		Lines: []domain.ReserveLine{{SKU: "RQ2", Location: &rl2, Quantity: 2}}}) // both pre-ordered
	mustOK("reserve with pre-order", err)
	// RQ@RL: 4 on hand (one sold), 3 reserved by held. RQ2@RL2: 1 on hand,
	// 1 reserved, 2 pre-ordered of 2 expected.

	b.evtRefused(t, "adjust below reserved", domain.CodeBelowReserved, func() error {
		_, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "RQ", Location: "RL", Delta: -2, Reason: "count", Reference: "C-1"})
		return err
	})
	stale := 5
	b.evtRefused(t, "adjust with a stale expected on hand", domain.CodeStaleQuantity, func() error {
		_, err := b.Store.StockAdjust(b.Ctx, domain.AdjustStockInput{SKU: "RQ", Location: "RL", Delta: 1, Reason: "count", Reference: "C-1", ExpectedOnHand: &stale})
		return err
	})
	b.evtRefused(t, "receive of an unknown SKU", domain.CodeUnknownSKU, func() error {
		_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "NOPE", Location: "RL", Quantity: 1, Reference: "PO"})
		return err
	})
	b.evtRefused(t, "receive of a CODES SKU by count", domain.CodeInvalidInput, func() error {
		_, err := b.Store.StockReceive(b.Ctx, domain.ReceiveStockInput{SKU: "RC", Location: "RL", Quantity: 1, Reference: "PO"})
		return err
	})
	b.evtRefused(t, "basket whose second balance is out of stock", domain.CodeOutOfStock, func() error {
		// The RL line is claimed first (its event written), then RL2 fails:
		// the whole claim rolls back, its event with it.
		_, _, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-5", RequestKey: "k1", TTLSeconds: 600,
			Lines: []domain.ReserveLine{{SKU: "RQ", Location: &rl, Quantity: 1}, {SKU: "RQ2", Location: &rl2, Quantity: 50}}})
		return err
	})
	b.evtRefused(t, "replayed reservation", "", func() error {
		res, replayed, err := b.Store.ReservationCreate(b.Ctx, domain.ReserveInput{CheckoutID: "cart-1", RequestKey: "k1", TTLSeconds: 600,
			Lines: []domain.ReserveLine{{SKU: "RQ", Location: &rl, Quantity: 3}}})
		if err == nil && (!replayed || res.ID != held.ID) {
			t.Fatalf("replay: %+v replayed=%v", res, replayed)
		}
		return err
	})
	b.evtRefused(t, "release of a confirmed reservation", domain.CodeInvalidTransition, func() error {
		_, err := b.Store.ReservationRelease(b.Ctx, domain.Scope{}, domain.ReleaseInput{ID: sold.ID, Reason: domain.ReasonOther})
		return err
	})
	b.evtRefused(t, "confirm with another order's ref", domain.CodeAlreadyExists, func() error {
		_, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: held.ID, OrderRef: "ORD-1"})
		return err
	})
	b.evtRefused(t, "confirm again (idempotent)", "", func() error {
		_, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: sold.ID, OrderRef: "ORD-1"})
		return err
	})
	b.evtRefused(t, "expiry job before the deadline", "", func() error {
		notBefore, _, err := b.Store.ReservationExpire(b.Ctx, held.ID)
		if err == nil && notBefore == nil {
			t.Fatal("ReservationExpire of a hold that is not due did not snooze")
		}
		return err
	})
	b.evtRefused(t, "setPreorder below what is pre-ordered", domain.CodeBelowReserved, func() error {
		_, err := b.Store.PreorderSet(b.Ctx, domain.SetPreorderInput{SKU: "RQ2", Location: "RL2", PendingSupply: 0})
		return err
	})
	b.evtRefused(t, "import into a QUANTITY SKU", domain.CodeInvalidInput, func() error {
		_, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "RQ", Location: "RL", BatchRef: "B9"}, codefile.List([]string{"REF-0009"}))
		return err
	})
	b.evtRefused(t, "the same batch imported again", "", func() error {
		_, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "RC", Location: "RL", BatchRef: "B1"}, codefile.List([]string{"REF-0001"}))
		return err
	})
	b.evtRefused(t, "a batch of only duplicates", "", func() error {
		batch, err := b.Store.CodesImport(b.Ctx, domain.ImportCodesInput{SKU: "RC", Location: "RL", BatchRef: "B2"}, codefile.List([]string{"REF-0001"}))
		if err == nil && batch.Inserted != 0 {
			t.Fatalf("duplicate import inserted %d", batch.Inserted)
		}
		return err
	})
	b.evtRefused(t, "sweep with nothing overdue", "", func() error {
		_, err := b.Store.ReservationSweepOverdue(b.Ctx, 0, 10)
		return err
	})
	if _, err := b.Pool.Exec(b.Ctx, `UPDATE reservations SET expires_at = now() - interval '1 minute' WHERE id = $1`, held.ID); err != nil {
		t.Fatal(err)
	}
	b.evtRefused(t, "confirm after the deadline", domain.CodeReservationExpired, func() error {
		_, err := b.Store.ReservationConfirm(b.Ctx, domain.Scope{}, domain.ConfirmInput{ID: held.ID, OrderRef: "ORD-2"})
		return err
	})
}
