package store_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"inventory/domain"
	"inventory/store"
)

func linAnswer(err error) linOutput {
	if err == nil {
		return linOutput{}
	}
	e, ok := domain.AsError(err)
	if !ok {
		return linOutput{code: "ERROR: " + err.Error()}
	}
	out := linOutput{code: string(e.Code)}
	if e.Available != nil {
		out.available, out.hasAvail = *e.Available, true
	}
	return out
}

// linOrderLine is the answer's order line, or an ERROR output when the
// order is not one line of the balance under test.
func linOrderLine(o *domain.Order) linOutput {
	if o == nil || len(o.Lines) != 1 || o.Lines[0].SKU != linSKU || o.Lines[0].Location != linLoc {
		return linOutput{code: fmt.Sprintf("ERROR: order %+v", o)}
	}
	l := o.Lines[0]
	return linOutput{line: [4]int{l.Quantity, l.Committed, l.Fulfilled, l.Cancelled}, hasLine: true}
}

// linBalance is the balance under test out of a list, or an ERROR output.
func linBalance(bs []domain.Balance) linOutput {
	for _, b := range bs {
		if b.SKU == linSKU && b.Location == linLoc {
			if b.Available() != b.OnHand-b.Reserved-b.Committed {
				return linOutput{code: fmt.Sprintf("ERROR: available %d of %+v", b.Available(), b)}
			}
			return linOutput{balance: [3]int{b.OnHand, b.Reserved, b.Committed}, hasBal: true}
		}
	}
	return linOutput{code: fmt.Sprintf("ERROR: no balance %s@%s in %+v", linSKU, linLoc, bs)}
}

// linClient is one client's view of what it made: its holds (held ones,
// by the test's number, with the store's id and units) and its orders
// (with what is open, as the answers said), and the fulfils and cancels
// that succeeded, to repeat.
type linClient struct {
	id      int
	rng     *rand.Rand
	stores  []*store.Store
	holds   map[int]linHold
	orders  map[int]linOrder
	refs    map[int]string // order number -> order ref
	done    []linInput
	counter int
}

type linHold struct {
	id    string
	units int
}

// next picks the client's next operation.
func (c *linClient) next() linInput {
	c.counter++
	num := c.id*1000 + c.counter
	pickHold := func() int {
		for h := range c.holds {
			return h
		}
		return 0
	}
	var open []int
	for o, ord := range c.orders {
		if ord.open() > 0 {
			open = append(open, o)
		}
	}
	for {
		switch r := c.rng.IntN(100); {
		case r < 22:
			if len(c.holds) < 3 {
				return linInput{kind: linReserve, hold: num, n: 1 + c.rng.IntN(2)}
			}
		case r < 40:
			if len(c.holds) > 0 {
				return linInput{kind: linConfirm, hold: pickHold(), order: num}
			}
		case r < 44:
			if len(c.holds) > 0 {
				return linInput{kind: linRelease, hold: pickHold()}
			}
		case r < 68:
			kind := linFulfil
			if r >= 58 {
				kind = linCancel
			}
			if len(c.orders) == 0 || len(open) == 0 && c.rng.IntN(4) > 0 {
				continue // rarely ask a finished order for more
			}
			o := 0
			if len(open) > 0 && c.rng.IntN(8) > 0 {
				o = open[c.rng.IntN(len(open))]
			} else {
				for k := range c.orders {
					o = k
					break
				}
			}
			n := 0 // the whole order
			switch open := c.orders[o].open(); {
			case c.rng.IntN(6) == 0:
				n = open + 1 // more than open: INVALID_INPUT
			case open > 0 && c.rng.IntN(3) > 0:
				n = 1 + c.rng.IntN(open) // a partial shipment or cancel
			}
			in := linInput{kind: kind, order: o, n: n, ref: fmt.Sprintf("r%d", num)}
			if kind == linCancel {
				in.reason = "customer_request"
			}
			return in
		case r < 74:
			if len(c.done) > 0 {
				in := c.done[c.rng.IntN(len(c.done))]
				if c.rng.IntN(2) == 0 { // the same reference, another input
					in.n++
				}
				return in
			}
		case r < 82:
			return linInput{kind: linCount, n: c.rng.IntN(21)}
		case r < 88:
			d := 1 + c.rng.IntN(3)
			if c.rng.IntN(2) == 0 {
				d = -d
			}
			return linInput{kind: linAdjust, n: d}
		default:
			return linInput{kind: linRead, n: c.rng.IntN(2)}
		}
	}
}

// run makes the call on one of the two instances and notes what it made.
func (c *linClient) run(b *testBundle, in linInput) linOutput {
	st := c.stores[c.rng.IntN(len(c.stores))]
	ctx := b.Ctx
	switch in.kind {
	case linReserve:
		loc := linLoc
		res, _, err := st.ReservationCreate(ctx, domain.ReserveInput{CheckoutID: fmt.Sprintf("lin-c%d", c.id), RequestKey: fmt.Sprintf("h%d", in.hold),
			TTLSeconds: 3600, Lines: []domain.ReserveLine{{SKU: linSKU, Location: &loc, Quantity: in.n}}})
		if err != nil {
			return linAnswer(err)
		}
		if res.Status != domain.StatusHeld || len(res.Lines) != 1 || res.Lines[0].Quantity != in.n || res.Lines[0].Location != linLoc {
			return linOutput{code: fmt.Sprintf("ERROR: held %+v", res)}
		}
		c.holds[in.hold] = linHold{id: res.ID, units: in.n}
		return linOutput{}

	case linConfirm:
		ref := fmt.Sprintf("lin-o%d", in.order)
		res, err := st.ReservationConfirm(ctx, domain.Scope{}, domain.ConfirmInput{ID: c.holds[in.hold].id, OrderRef: ref})
		if err != nil {
			return linAnswer(err)
		}
		if res.Status != domain.StatusConfirmed || res.Order == nil || res.Order.Ref != ref {
			return linOutput{code: fmt.Sprintf("ERROR: confirmed %+v", res)}
		}
		out := linOrderLine(res.Order)
		delete(c.holds, in.hold)
		c.orders[in.order] = linOrder{quantity: out.line[0], fulfilled: out.line[2], cancelled: out.line[3]}
		c.refs[in.order] = ref
		return out

	case linRelease:
		res, err := st.ReservationRelease(ctx, domain.Scope{}, domain.ReleaseInput{ID: c.holds[in.hold].id, Reason: domain.ReasonCustomerCancelled})
		if err != nil {
			return linAnswer(err)
		}
		if res.Status != domain.StatusReleased {
			return linOutput{code: fmt.Sprintf("ERROR: released %+v", res)}
		}
		delete(c.holds, in.hold)
		return linOutput{}

	case linFulfil, linCancel:
		oi := domain.OrderChangeInput{OrderRef: c.refs[in.order], Reference: in.ref, Reason: in.reason}
		if in.n > 0 {
			oi.Lines = []domain.OrderQuantity{{SKU: linSKU, Location: linLoc, Quantity: in.n}}
		}
		call := st.OrderFulfill
		if in.kind == linCancel {
			call = st.OrderCancel
		}
		ch, err := call(ctx, oi)
		if err != nil {
			return linAnswer(err)
		}
		out := linOrderLine(&ch.Order)
		out.replayed = ch.Replayed
		if !ch.Replayed && out.hasLine {
			c.done = append(c.done, in)
		}
		if out.hasLine {
			c.orders[in.order] = linOrder{quantity: out.line[0], fulfilled: out.line[2], cancelled: out.line[3]}
		}
		return out

	case linCount:
		res, err := st.StockLevelsSet(ctx, domain.SetStockLevelsInput{Reference: fmt.Sprintf("lin-count-c%d-%d", c.id, c.counter),
			Levels: []domain.StockLevel{{SKU: linSKU, Location: linLoc, OnHand: in.n}}})
		switch {
		case err != nil:
			return linAnswer(err)
		case res.Replayed:
			return linOutput{code: fmt.Sprintf("ERROR: replayed %+v", res)}
		case res.Failed == 1 && len(res.Errors) == 1 && res.Applied == 0 && res.Unchanged == 0:
			return linAnswer(&res.Errors[0])
		case res.Unchanged == 1 && res.Applied == 0 && res.Failed == 0 && len(res.Balances) == 0:
			return linOutput{unchanged: true}
		case res.Applied == 1 && res.Unchanged == 0 && res.Failed == 0 && len(res.Balances) == 1:
			return linBalance(res.Balances)
		}
		return linOutput{code: fmt.Sprintf("ERROR: stock levels %+v", res)}

	case linAdjust:
		res, err := st.StockAdjust(ctx, domain.AdjustStockInput{SKU: linSKU, Location: linLoc, Delta: in.n, Reason: "cycle_count",
			Reference: fmt.Sprintf("lin-adjust-c%d-%d", c.id, c.counter)})
		if err != nil {
			return linAnswer(err)
		}
		return linBalance([]domain.Balance{res.Balance})

	case linRead:
		if in.n == 0 {
			page, err := st.BalanceList(ctx, "", 10)
			if err != nil {
				return linAnswer(err)
			}
			return linBalance(page.Balances)
		}
		got, err := st.AvailabilityList(ctx, domain.AvailabilityQuery{SKUs: []string{linSKU}, Locations: []string{linLoc}})
		if err != nil {
			return linAnswer(err)
		}
		if len(got) != 1 || got[0] == nil {
			return linOutput{code: fmt.Sprintf("ERROR: availability %+v", got)}
		}
		return linBalance(got[0].Locations)
	}
	panic("unknown operation")
}

// TestCommittedBalanceLinearizable: 8 clients, over two store instances on
// one database (as two servers), reserve, confirm, release, fulfil, cancel,
// count, adjust and read one balance at an ON_SHIPMENT location
// concurrently; porcupine then checks that every answer — success or
// refusal, the refusal's available, the balance or the order line it
// carries, replayed — is one a store that ran the calls one at a time, each
// somewhere between its call and its return, would have given. That is the
// extended balance (onHand, reserved, committed) being linearizable: a
// count never undoes a confirm, a fulfil never ships a unit twice, a
// cancel's units are for sale at once, and reads are never stale. At the
// end the balance agrees with its ledger, its holds and its open orders.
func TestCommittedBalanceLinearizable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.Store.LocationCreate(b.Ctx, domain.CreateLocationInput{Code: linLoc, Name: "Warehouse", Fulfillment: domain.FulfillOnShipment}); err != nil {
		t.Fatal(err)
	}
	mustSKU(t, b, linSKU, domain.KindQuantity)
	mustReceive(t, b, linSKU, linLoc, linInitial)
	stores := []*store.Store{b.Store, b.secondInstance(t)}

	const clients, opsEach = 8, 40
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	start := time.Now()
	histories := make([][]porcupine.Operation, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := &linClient{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), stores: stores,
				holds: map[int]linHold{}, orders: map[int]linOrder{}, refs: map[int]string{}}
			for range opsEach {
				in := c.next()
				called := time.Since(start).Nanoseconds()
				out := c.run(b, in)
				returned := time.Since(start).Nanoseconds()
				histories[i] = append(histories[i], porcupine.Operation{ClientId: i, Input: in, Call: called, Output: out, Return: returned})
				if strings.HasPrefix(out.code, "ERROR") {
					t.Errorf("client %d, %s %+v: %s", i, linKindNames[in.kind], in, out.code)
					return
				}
			}
		})
	}
	wg.Wait()
	var history []porcupine.Operation
	for _, h := range histories {
		history = append(history, h...)
	}
	// One last read after everything, so the final balance is checked too.
	called := time.Since(start).Nanoseconds()
	page, err := b.Store.BalanceList(b.Ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	final := linBalance(page.Balances)
	history = append(history, porcupine.Operation{ClientId: clients, Input: linInput{kind: linRead}, Call: called, Output: final,
		Return: time.Since(start).Nanoseconds()})

	kinds := map[string]int{}
	for _, op := range history {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		name := linKindNames[in.kind]
		if out.code != "" {
			name += " " + out.code
		} else if out.replayed {
			name += " replayed"
		}
		kinds[name]++
	}
	t.Logf("%d operations in %s: %v; final balance %v", len(history), time.Since(start).Round(time.Millisecond), kinds, final.balance)
	if t.Failed() {
		t.FailNow()
	}
	// The workload must have reached the interesting answers, or the check
	// below proves little.
	for _, k := range []string{"confirm", "fulfil", "cancel", "count", "count " + string(domain.CodeBelowReserved), "read"} {
		if kinds[k] == 0 {
			t.Fatalf("no %q in the history (%v); the workload did not reach it", k, kinds)
		}
	}

	checked := time.Now()
	res, info := porcupine.CheckOperationsVerbose(linModel, history, 60*time.Second)
	t.Logf("porcupine: %s in %s", map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown"}[res],
		time.Since(checked).Round(time.Millisecond))
	if res != porcupine.Ok {
		f, err := os.CreateTemp("", "committed-linearizable-*.html")
		if err == nil {
			if err := porcupine.Visualize(linModel, info, f); err != nil {
				t.Logf("visualize: %v", err)
			}
			_ = f.Close()
			t.Logf("visualization: %s", f.Name())
		}
		if res == porcupine.Illegal {
			t.Fatalf("the history is not linearizable (seed %d): no order of the calls within their intervals explains every answer", seed)
		}
		t.Fatalf("porcupine could not decide within its timeout (seed %d)", seed)
	}

	// In SQL: the balance equals its ledger, reserved its held lines,
	// committed the open order lines' units in hand; nothing negative.
	b.requireInvariants(t)
	var ordered, unshipped int
	if err := b.Pool.QueryRow(b.Ctx, `
		SELECT coalesce(sum(quantity), 0), coalesce(sum(quantity - fulfilled - cancelled), 0) FROM order_lines`).Scan(&ordered, &unshipped); err != nil {
		t.Fatal(err)
	}
	if final.balance[2] != unshipped {
		t.Fatalf("committed %d, but the order lines have %d units neither shipped nor cancelled (of %d sold)", final.balance[2], unshipped, ordered)
	}
}
