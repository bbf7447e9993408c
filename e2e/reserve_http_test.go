package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

const reserveMutation = `mutation($in: ReserveInput!) { reserve(input: $in) {
	replayed reservation { id status checkoutId lines { sku location quantity } }
	userErrors { code line sku available message } } }`

// reservePayload is the part of ReservePayload the tests read.
type reservePayload struct {
	Replayed    bool `json:"replayed"`
	Reservation *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"reservation"`
	UserErrors []struct {
		Code      string `json:"code"`
		Line      *int   `json:"line"`
		Available *int   `json:"available"`
	} `json:"userErrors"`
}

func reserveVars(checkout, key, sku string, q int) map[string]any {
	return map[string]any{"in": map[string]any{"checkoutId": checkout, "requestKey": key,
		"lines": []map[string]any{{"sku": sku, "location": "AMS", "quantity": q}}}}
}

func decodeReserve(r gqlResponse) (reservePayload, error) {
	var p reservePayload
	if len(r.Errors) > 0 {
		return p, fmt.Errorf("errors: %+v", r.Errors)
	}
	return p, json.Unmarshal(r.Data["reserve"], &p)
}

// TestReserveLastUnitOverHTTP: 50 concurrent checkouts reserve the last unit
// over HTTP; exactly one holds it, 49 are told OUT_OF_STOCK with 0 available.
func TestReserveLastUnitOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("CONSOLE", 1)

	var wg sync.WaitGroup
	results := make([]reservePayload, 50)
	errs := make([]error, 50)
	for i := range 50 {
		wg.Go(func() {
			r, err := gqlTo(ts.url, ts.service, reserveMutation, reserveVars(fmt.Sprintf("cart-%d", i), "k", "CONSOLE", 1))
			if err == nil {
				results[i], err = decodeReserve(r)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	won, lost := 0, 0
	for i, p := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("call %d: %v", i, errs[i])
		case p.Reservation != nil && p.Reservation.Status == "HELD" && len(p.UserErrors) == 0:
			won++
		case len(p.UserErrors) == 1 && p.UserErrors[0].Code == "OUT_OF_STOCK" && *p.UserErrors[0].Available == 0 && *p.UserErrors[0].Line == 0:
			lost++
		default:
			t.Fatalf("call %d: unexpected %+v", i, p)
		}
	}
	if won != 1 || lost != 49 {
		t.Fatalf("won %d, lost %d", won, lost)
	}
	if n := ts.count(`SELECT reserved FROM balances`); n != 1 {
		t.Fatalf("reserved %d", n)
	}
	if n := ts.count(`SELECT count(*) FROM reservations WHERE status = 'held'`); n != 1 {
		t.Fatalf("%d held reservations", n)
	}
	if n := ts.count(`SELECT count(*) FROM allocation_failures`); n != 49 {
		t.Fatalf("%d allocation failures recorded", n)
	}
	// On-call sees the same in /metrics.
	code, body := httpGetAs(t, ts.url+"/metrics", ts.admin)
	for _, want := range []string{
		`inventory_operations_total{operation="reserve",outcome="ok"} 1`,
		`inventory_operations_total{operation="reserve",outcome="out_of_stock"} 49`,
		`inventory_subscribers 0`,
		`inventory_sweeper_released_total 0`,
		`inventory_http_request_duration_seconds_count{code="200",method="post"}`,
		// Every one of the 50 single-line reserves went through a batch.
		`inventory_reserve_batch_requests_total 50`,
		`inventory_reserve_batch_failures_total 0`,
		`inventory_confirm_batch_requests_total 0`,
		`inventory_confirm_batch_failures_total 0`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q", code, want)
		}
	}
	if strings.Contains(body, ts.service) || strings.Contains(body, "cart-") {
		t.Fatal("/metrics leaks a token or a checkout id")
	}
}

// TestLostResponseOverHTTP retries a successful reserve with the same key,
// once while stock is left and once after it ran out: the unit is held once
// and both replays return the same reservation.
func TestLostResponseOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 2)

	first, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "pay-1", "HP", 1)))
	if err != nil || first.Reservation == nil || first.Replayed {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "pay-1", "HP", 1)))
	if err != nil || !again.Replayed || again.Reservation.ID != first.Reservation.ID {
		t.Fatalf("replay with stock left: %+v %v", again, err)
	}
	// Someone else takes the last unit; the retry still gets its hold back.
	other, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-2", "x", "HP", 1)))
	if err != nil || other.Reservation == nil {
		t.Fatalf("other: %+v %v", other, err)
	}
	late, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "pay-1", "HP", 1)))
	if err != nil || !late.Replayed || late.Reservation.ID != first.Reservation.ID || len(late.UserErrors) != 0 {
		t.Fatalf("replay with no stock left: %+v %v", late, err)
	}
	if n := ts.count(`SELECT reserved FROM balances`); n != 2 {
		t.Fatalf("reserved %d, want 2 (one per checkout)", n)
	}
	reused, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "pay-1", "HP", 2)))
	if err != nil || reused.Reservation != nil || len(reused.UserErrors) != 1 || reused.UserErrors[0].Code != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("key reused: %+v %v", reused, err)
	}
}

// TestTwoInstances runs two servers on one database and sends 100 concurrent
// reservations for 30 units, split across them: exactly 30 succeed.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("DROP", 30)
	second, _ := ts.startInstance()

	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	var failures []string
	for i := range 100 {
		url := ts.url
		if i%2 == 1 {
			url = second
		}
		wg.Go(func() {
			r, err := gqlTo(url, ts.service, reserveMutation, reserveVars(fmt.Sprintf("cart-%d", i), "k", "DROP", 1))
			var p reservePayload
			if err == nil {
				p, err = decodeReserve(r)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case p.Reservation != nil:
				won++
			case len(p.UserErrors) == 1 && p.UserErrors[0].Code == "OUT_OF_STOCK":
				lost++
			default:
				failures = append(failures, fmt.Sprintf("%+v", p))
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 || won != 30 || lost != 70 {
		t.Fatalf("won %d, lost %d, failures %v", won, lost, failures)
	}
	if n := ts.count(`SELECT reserved FROM balances`); n != 30 {
		t.Fatalf("reserved %d", n)
	}
	if n := ts.count(`SELECT count(*) FROM river_job WHERE kind = 'reservation_expiry'`); n != 30 {
		t.Fatalf("%d expiry jobs for 30 holds", n)
	}
}
