package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
)

const (
	adjustStockMutation = `mutation($in: AdjustStockInput!) { adjustStock(input: $in) {
	replayed balance { sku location onHand reserved available } userErrors { code message field } } }`
	receiveStockMutation = `mutation($in: ReceiveStockInput!) { receiveStock(input: $in) {
	replayed balance { sku location onHand reserved available } userErrors { code message field } } }`
)

// balanceAnswer is a BalancePayload as a client reads it.
type balanceAnswer struct {
	Replayed bool `json:"replayed"`
	Balance  *struct {
		SKU       string `json:"sku"`
		Location  string `json:"location"`
		OnHand    int    `json:"onHand"`
		Reserved  int    `json:"reserved"`
		Available int    `json:"available"`
	} `json:"balance"`
	UserErrors []struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Field   []string `json:"field"`
	} `json:"userErrors"`
}

// onHand is the answer's on hand, or -1 when it has no balance.
func (a balanceAnswer) onHand() int {
	if a.Balance == nil {
		return -1
	}
	return a.Balance.OnHand
}

// refused says whether the answer is exactly one userError code on field
// [input, field] with no balance.
func (a balanceAnswer) refused(code, field string) bool {
	return a.Balance == nil && !a.Replayed && len(a.UserErrors) == 1 && a.UserErrors[0].Code == code &&
		slices.Equal(a.UserErrors[0].Field, []string{"input", field})
}

func (ts *testServer) balanceCall(mutation, field string, in map[string]any) balanceAnswer {
	ts.t.Helper()
	var a balanceAnswer
	ts.mustData(ts.gql(ts.admin, mutation, map[string]any{"in": in}), field, &a)
	return a
}

func (ts *testServer) adjustStock(in map[string]any) balanceAnswer {
	ts.t.Helper()
	return ts.balanceCall(adjustStockMutation, "adjustStock", in)
}

func (ts *testServer) receiveStock(in map[string]any) balanceAnswer {
	ts.t.Helper()
	return ts.balanceCall(receiveStockMutation, "receiveStock", in)
}

// stockCounts is what a stock call may change, read in SQL: HP's on hand at
// AMS and its ledger and event rows.
type stockCounts struct{ onHand, movements, events int }

func (ts *testServer) stockCounts() stockCounts {
	ts.t.Helper()
	return stockCounts{
		onHand: ts.count(`SELECT b.on_hand FROM balances b JOIN skus s ON s.id = b.sku_id JOIN locations l ON l.id = b.location_id
			WHERE s.code = 'HP' AND l.code = 'AMS'`),
		movements: ts.count(`SELECT count(*) FROM stock_movements`),
		events:    ts.count(`SELECT count(*) FROM stock_events`),
	}
}

// TestAdjustStockReferenceIsFreeText is the ERP row against the real
// binary: adjustStock(delta: -1, reason: "damaged", reference: "RMA-3")
// twice, for two damaged units. Before, on hand went 10 → 9: the second call
// was swallowed as a replay of the first, and its answer said nothing. Now a
// reference is free text for the ledger and both apply (10 → 8, two ledger
// rows), replayed false. A retry is made safe by asking for it: the same
// call with one requestKey applies once and the repeat answers
// replayed: true with the same balance; that requestKey with another delta
// is IDEMPOTENCY_KEY_REUSED and changes nothing (on hand, ledger, events).
func TestAdjustStockReferenceIsFreeText(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, nil)
	s.seed("HP", 10)

	damaged := map[string]any{"sku": "HP", "location": "AMS", "delta": -1, "reason": "damaged", "reference": "RMA-3"}
	first, second := s.adjustStock(damaged), s.adjustStock(damaged)
	got := s.stockCounts()
	t.Logf("two adjustments of -1 under RMA-3: answers %d, %d (replayed %v, %v); on hand 10 → %d in SQL, %d ledger rows under RMA-3",
		first.onHand(), second.onHand(), first.Replayed, second.Replayed, got.onHand,
		s.count(`SELECT count(*) FROM stock_movements WHERE reference = 'RMA-3'`))
	if first.onHand() != 9 || second.onHand() != 8 || first.Replayed || second.Replayed || len(first.UserErrors)+len(second.UserErrors) != 0 {
		t.Fatalf("two adjustments under one reference: %+v, %+v; want on hand 9 then 8, neither replayed", first, second)
	}
	if got.onHand != 8 || s.count(`SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = 'RMA-3' AND on_hand_delta = -1`) != 2 {
		t.Fatalf("two adjustments of -1 under one reference: on hand %d in SQL, want 8, and two ledger rows", got.onHand)
	}

	// With a requestKey a retry is safe: applied once, the repeat says so.
	keyed := map[string]any{"sku": "HP", "location": "AMS", "delta": -1, "reason": "damaged", "reference": "RMA-4", "requestKey": "rma-4-line-1"}
	applied := s.adjustStock(keyed)
	afterApplied := s.stockCounts()
	repeat := s.adjustStock(keyed)
	afterRepeat := s.stockCounts()
	t.Logf("one requestKey sent twice: answers %d, %d (replayed %v, %v); on hand %d → %d → %d in SQL",
		applied.onHand(), repeat.onHand(), applied.Replayed, repeat.Replayed, got.onHand, afterApplied.onHand, afterRepeat.onHand)
	if applied.onHand() != 7 || applied.Replayed || !repeat.Replayed || repeat.Balance == nil || *repeat.Balance != *applied.Balance || len(repeat.UserErrors) != 0 {
		t.Fatalf("a repeat with one requestKey: %+v then %+v; want on hand 7 applied, then replayed with the same balance", applied, repeat)
	}
	if afterApplied.onHand != 7 || afterRepeat != afterApplied {
		t.Fatalf("a repeat with one requestKey changed the database: %+v → %+v", afterApplied, afterRepeat)
	}

	// The same requestKey with another delta: refused, nothing changes.
	reused := s.adjustStock(map[string]any{"sku": "HP", "location": "AMS", "delta": -2, "reason": "damaged", "reference": "RMA-4", "requestKey": "rma-4-line-1"})
	if !reused.refused("IDEMPOTENCY_KEY_REUSED", "requestKey") {
		t.Fatalf("the requestKey with another delta: %+v; want IDEMPOTENCY_KEY_REUSED on [input requestKey], no balance", reused)
	}
	if after := s.stockCounts(); after != afterRepeat {
		t.Fatalf("a reused requestKey changed the database: %+v → %+v", afterRepeat, after)
	}
	t.Logf("the requestKey with delta -2: %s (%s)", reused.UserErrors[0].Code, reused.UserErrors[0].Message)
}

// TestReceiveStockReplaySaysSo is the receipt row against the real
// binary. receiveStock stays idempotent per (sku, location, reference), its
// reference naming one receipt (a delivery note): the same receipt again
// changes nothing, and now says so with replayed: true (before, the answer
// was the same as a receipt's and the ERP could not tell). The same
// reference with another quantity is IDEMPOTENCY_KEY_REUSED and changes
// nothing; a second partial delivery of one purchase order, under its own
// delivery note, is a receipt. Every other BalancePayload says replayed
// false (setPreorder).
func TestReceiveStockReplaySaysSo(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, nil)
	s.seed("HP", 10)

	receipt := map[string]any{"sku": "HP", "location": "AMS", "quantity": 5, "reference": "PO-77/DN-1"}
	first := s.receiveStock(receipt)
	afterFirst := s.stockCounts()
	again := s.receiveStock(receipt)
	afterAgain := s.stockCounts()
	t.Logf("one receipt of 5 sent twice: answers %d, %d (replayed %v, %v); on hand 10 → %d → %d in SQL",
		first.onHand(), again.onHand(), first.Replayed, again.Replayed, afterFirst.onHand, afterAgain.onHand)
	if first.onHand() != 15 || first.Replayed || !again.Replayed || again.Balance == nil || *again.Balance != *first.Balance || len(again.UserErrors) != 0 {
		t.Fatalf("a repeated receipt: %+v then %+v; want on hand 15 applied, then replayed with the same balance", first, again)
	}
	if afterFirst.onHand != 15 || afterAgain != afterFirst {
		t.Fatalf("a repeated receipt changed the database: %+v → %+v", afterFirst, afterAgain)
	}

	// The receipt's reference with another quantity: refused, nothing changes.
	reused := s.receiveStock(map[string]any{"sku": "HP", "location": "AMS", "quantity": 3, "reference": "PO-77/DN-1"})
	if !reused.refused("IDEMPOTENCY_KEY_REUSED", "reference") {
		t.Fatalf("the receipt's reference with another quantity: %+v; want IDEMPOTENCY_KEY_REUSED on [input reference], no balance", reused)
	}
	if after := s.stockCounts(); after != afterAgain {
		t.Fatalf("a reused receipt reference changed the database: %+v → %+v", afterAgain, after)
	}
	t.Logf("the reference with quantity 3: %s (%s)", reused.UserErrors[0].Code, reused.UserErrors[0].Message)

	// The second partial delivery of PO-77, under its own delivery note.
	if next := s.receiveStock(map[string]any{"sku": "HP", "location": "AMS", "quantity": 5, "reference": "PO-77/DN-2"}); next.onHand() != 20 || next.Replayed {
		t.Fatalf("the second delivery of PO-77: %+v; want on hand 20, not replayed", next)
	}
	var pre balanceAnswer
	s.mustData(s.gql(s.admin, `mutation { setPreorder(input: {sku: "HP", location: "AMS", pendingSupply: 4}) { replayed balance { onHand } userErrors { code } } }`, nil), "setPreorder", &pre)
	if pre.Replayed || pre.onHand() != 20 || len(pre.UserErrors) != 0 {
		t.Fatalf("setPreorder: %+v; want replayed false", pre)
	}
}

// TestAdjustStockConcurrentRequestKeys: n admins (or one ERP's retries)
// send the same adjustStock with one requestKey at once, over two
// instances: exactly one applies (one answer replayed false, every answer
// the same on hand; on hand and ledger rows counted in SQL). Then n
// adjustments under one reference with distinct requestKeys, at once: all
// apply.
func TestAdjustStockConcurrentRequestKeys(t *testing.T) {
	t.Parallel()
	const n = 16
	ts := setup(t)
	ts.seed("HP", 100)
	second, _ := ts.startInstance()
	urls := []string{ts.url, second}

	storm := func(in func(i int) map[string]any) []balanceAnswer {
		t.Helper()
		answers := make([]balanceAnswer, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := gqlTo(urls[i%2], ts.admin, adjustStockMutation, map[string]any{"in": in(i)})
				switch {
				case err != nil:
					errs[i] = err
				case len(r.Errors) > 0:
					errs[i] = fmt.Errorf("%+v", r.Errors)
				default:
					errs[i] = json.Unmarshal(r.Data["adjustStock"], &answers[i])
				}
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("concurrent adjustment %d: %v", i, err)
			}
			if len(answers[i].UserErrors) != 0 {
				t.Fatalf("concurrent adjustment %d: %+v", i, answers[i].UserErrors)
			}
		}
		return answers
	}
	ledger := func(reference string) int {
		t.Helper()
		return ts.count(fmt.Sprintf(`SELECT count(*) FROM stock_movements WHERE cause = 'adjusted' AND reference = '%s'`, reference))
	}

	same := storm(func(int) map[string]any {
		return map[string]any{"sku": "HP", "location": "AMS", "delta": -1, "reason": "damaged", "reference": "RMA-storm", "requestKey": "storm-1"}
	})
	applied := 0
	for i, a := range same {
		if a.onHand() != 99 {
			t.Fatalf("answer %d to one requestKey sent %d times at once: on hand %d, want 99", i, n, a.onHand())
		}
		if !a.Replayed {
			applied++
		}
	}
	onHand, rows := ts.stockCounts().onHand, ledger("RMA-storm")
	t.Logf("%d concurrent adjustments of -1 with one requestKey over two instances: %d answered applied, on hand 100 → %d, %d ledger rows", n, applied, onHand, rows)
	if applied != 1 || onHand != 99 || rows != 1 {
		t.Fatalf("one requestKey sent %d times at once: %d applied, on hand %d, %d ledger rows; want 1, 99, 1", n, applied, onHand, rows)
	}

	distinct := storm(func(i int) map[string]any {
		return map[string]any{"sku": "HP", "location": "AMS", "delta": -1, "reason": "damaged", "reference": "RMA-many", "requestKey": fmt.Sprintf("many-%d", i)}
	})
	seen := map[int]bool{}
	for i, a := range distinct {
		if a.Replayed || seen[a.onHand()] || a.onHand() < 99-n || a.onHand() > 98 {
			t.Fatalf("answer %d of %d distinct requestKeys under one reference: %+v (answers so far %v)", i, n, a, seen)
		}
		seen[a.onHand()] = true
	}
	onHand, rows = ts.stockCounts().onHand, ledger("RMA-many")
	t.Logf("%d concurrent adjustments of -1 under one reference with distinct requestKeys: on hand 99 → %d, %d ledger rows", n, onHand, rows)
	if onHand != 99-n || rows != n {
		t.Fatalf("%d distinct requestKeys under one reference: on hand %d, %d ledger rows; want %d, %d", n, onHand, rows, 99-n, n)
	}
}
