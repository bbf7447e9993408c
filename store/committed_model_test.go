package store_test

import (
	"fmt"
	"maps"
	"strings"

	"github.com/anishathalye/porcupine"

	"inventory/domain"
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
