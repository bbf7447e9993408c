package store_test

import (
	"fmt"
	"maps"
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

// The balance under test: one QUANTITY SKU at one ON_SHIPMENT location.
const (
	linSKU = "LIN-BOOT"
	linLoc = "LIN-WH"
)

// linKind is what a linearizability-test operation does.
type linKind int

const (
	linReserve linKind = iota // hold n units (ok or OUT_OF_STOCK)
	linConfirm                // sell a hold as an order: reserved -> committed
	linRelease                // give a hold back
	linFulfil                 // ship n units of an order (0: all in hand)
	linCancel                 // give back n open units of an order (0: all)
	linCount                  // a physical count: StockLevelsSet to n
	linAdjust                 // adjustStock by n
	linRead                   // read the balance (BalanceList or AvailabilityList)
)

var linKindNames = [...]string{"reserve", "confirm", "release", "fulfil", "cancel", "count", "adjust", "read"}

// linInput is one call as the model sees it. hold and order are the test's
// own numbers for a hold and for the order its confirm wrote.
type linInput struct {
	kind   linKind
	hold   int
	order  int
	n      int
	ref    string // fulfil, cancel: the reference
	reason string // cancel
}

// linOutput is what the store answered, all of it comparable: the business
// code ("" for success, "ERROR: ..." for anything that is not a business
// answer), the refusal's available, and the balance or order line the
// answer carries.
type linOutput struct {
	code      string
	available int
	hasAvail  bool
	replayed  bool
	unchanged bool   // count: equal to on hand, nothing written
	balance   [3]int // onHand, reserved, committed after (count applied, adjust, read)
	hasBal    bool
	line      [4]int // quantity, committed, fulfilled, cancelled of the order line after
	hasLine   bool
}

// linOrder is an order as the model keeps it (one line).
type linOrder struct{ quantity, fulfilled, cancelled int }

func (o linOrder) open() int { return o.quantity - o.fulfilled - o.cancelled }

// linState is the sequential specification's state: the balance and what
// stands behind it (held holds and open orders), and the fingerprints of
// the fulfils and cancels done, per (order, reference).
type linState struct {
	onHand, reserved, committed int
	holds                       map[int]int // held: units
	orders                      map[int]linOrder
	actions                     map[string]string
}

func (s linState) clone() linState {
	s.holds, s.orders, s.actions = maps.Clone(s.holds), maps.Clone(s.orders), maps.Clone(s.actions)
	return s
}

func (s linState) balance() [3]int { return [3]int{s.onHand, s.reserved, s.committed} }

// lineOf is an order's line as the answers show it: committed is what is in
// hand (the location ships on shipment).
func lineOf(o linOrder) [4]int { return [4]int{o.quantity, o.open(), o.fulfilled, o.cancelled} }

// fingerprint names a fulfil's or cancel's input for idempotency.
func (in linInput) fingerprint() string {
	if in.kind == linCancel {
		return fmt.Sprintf("cancel|%s|%d", in.reason, in.n)
	}
	return fmt.Sprintf("fulfil|%d", in.n)
}

// linStep is the sequential specification: whether out is what a store
// that runs one call at a time would answer to in in state s, and the state
// after.
func linStep(s linState, in linInput, out linOutput) (bool, linState) {
	if strings.HasPrefix(out.code, "ERROR") {
		return false, s
	}
	free := s.onHand - s.reserved - s.committed
	switch in.kind {
	case linReserve:
		if free < in.n {
			return out == linOutput{code: string(domain.CodeOutOfStock), available: free, hasAvail: true}, s
		}
		if out != (linOutput{}) {
			return false, s
		}
		s = s.clone()
		s.reserved += in.n
		s.holds[in.hold] = in.n
		return true, s

	case linConfirm:
		q, ok := s.holds[in.hold]
		if !ok {
			return false, s
		}
		o := linOrder{quantity: q}
		if out != (linOutput{line: lineOf(o), hasLine: true}) {
			return false, s
		}
		s = s.clone()
		delete(s.holds, in.hold)
		s.reserved -= q
		s.committed += q
		s.orders[in.order] = o
		return true, s

	case linRelease:
		q, ok := s.holds[in.hold]
		if !ok || out != (linOutput{}) {
			return false, s
		}
		s = s.clone()
		delete(s.holds, in.hold)
		s.reserved -= q
		return true, s

	case linFulfil, linCancel:
		o, ok := s.orders[in.order]
		if !ok {
			return false, s
		}
		key := fmt.Sprintf("%d/%s", in.order, in.ref)
		if prior, done := s.actions[key]; done {
			if prior == in.fingerprint() {
				return out == linOutput{replayed: true, line: lineOf(o), hasLine: true}, s
			}
			return out == linOutput{code: string(domain.CodeIdempotencyKeyReused)}, s
		}
		want := in.n
		switch {
		case want == 0 && o.open() == 0:
			return out == linOutput{code: string(domain.CodeInvalidInput)}, s
		case want == 0:
			want = o.open()
		case want > o.open():
			return out == linOutput{code: string(domain.CodeInvalidInput), available: o.open(), hasAvail: true}, s
		}
		if in.kind == linFulfil {
			o.fulfilled += want
		} else {
			o.cancelled += want
		}
		if out != (linOutput{line: lineOf(o), hasLine: true}) {
			return false, s
		}
		s = s.clone()
		s.orders[in.order] = o
		s.actions[key] = in.fingerprint()
		s.committed -= want // in hand at an ON_SHIPMENT location: committed
		if in.kind == linFulfil {
			s.onHand -= want // shipped: it leaves the shelf
		}
		return true, s

	case linCount:
		switch lowest := s.reserved + s.committed; {
		case in.n < lowest:
			return out == linOutput{code: string(domain.CodeBelowReserved), available: lowest, hasAvail: true}, s
		case in.n == s.onHand:
			return out == linOutput{unchanged: true}, s
		}
		s = s.clone()
		s.onHand = in.n
		return out == linOutput{balance: s.balance(), hasBal: true}, s

	case linAdjust:
		if s.onHand+in.n < s.reserved+s.committed {
			return out == linOutput{code: string(domain.CodeBelowReserved), available: free, hasAvail: true}, s
		}
		s = s.clone()
		s.onHand += in.n
		return out == linOutput{balance: s.balance(), hasBal: true}, s

	case linRead:
		return out == linOutput{balance: s.balance(), hasBal: true}, s
	}
	return false, s
}

var linModel = porcupine.Model{
	Init: func() any {
		return linState{onHand: linInitial, holds: map[int]int{}, orders: map[int]linOrder{}, actions: map[string]string{}}
	},
	Step: func(state, input, output any) (bool, any) {
		return linStep(state.(linState), input.(linInput), output.(linOutput))
	},
	Equal: func(a, b any) bool {
		x, y := a.(linState), b.(linState)
		return x.balance() == y.balance() && maps.Equal(x.holds, y.holds) && maps.Equal(x.orders, y.orders) && maps.Equal(x.actions, y.actions)
	},
	Hash: func(state any) uint64 {
		s := state.(linState)
		return uint64(s.onHand)<<48 ^ uint64(s.reserved)<<32 ^ uint64(s.committed)<<16 ^
			uint64(len(s.holds))<<8 ^ uint64(len(s.orders))<<4 ^ uint64(len(s.actions))
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		var what string
		switch in.kind {
		case linReserve:
			what = fmt.Sprintf("reserve(h%d, %d)", in.hold, in.n)
		case linConfirm, linRelease:
			what = fmt.Sprintf("%s(h%d -> o%d)", linKindNames[in.kind], in.hold, in.order)
		case linFulfil, linCancel:
			what = fmt.Sprintf("%s(o%d, %d, %s)", linKindNames[in.kind], in.order, in.n, in.ref)
		default:
			what = fmt.Sprintf("%s(%d)", linKindNames[in.kind], in.n)
		}
		return fmt.Sprintf("%s -> %+v", what, out)
	},
	DescribeState: func(state any) string {
		s := state.(linState)
		return fmt.Sprintf("onHand %d reserved %d committed %d holds %v orders %v", s.onHand, s.reserved, s.committed, s.holds, s.orders)
	},
}

const linInitial = 10

// linAnswer turns a store error into the output's code (and available).
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
