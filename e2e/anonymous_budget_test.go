package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seedSKUs creates n QUANTITY SKUs P0000… with stock at AMS (through the
// API, eight at a time) and returns their codes.
func seedSKUs(t *testing.T, ts *testServer, n int) []string {
	t.Helper()
	ts.seed("HOT", 1_000_000)
	codes := make([]string, n)
	levels := make([]map[string]any, n)
	for i := range codes {
		codes[i] = fmt.Sprintf("P%04d", i)
		levels[i] = map[string]any{"sku": codes[i], "location": "AMS", "onHand": 100 + i}
	}
	var wg sync.WaitGroup
	var failed atomic.Value
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				r, err := gqlTo(ts.url, ts.admin, `mutation($c: String!) { createSku(input: {code: $c, name: "Thing", kind: QUANTITY}) { userErrors { code } } }`,
					map[string]any{"c": codes[i]})
				if err != nil || len(r.Errors) > 0 {
					failed.Store(fmt.Sprint(err, r.Errors))
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("createSku: %v", f)
	}
	var p struct{ UserErrors []any }
	ts.mustData(ts.gql(ts.admin, `mutation($in: SetStockLevelsInput!) { setStockLevels(input: $in) { userErrors { code message } } }`,
		map[string]any{"in": map[string]any{"reference": "seed", "levels": levels}}), "setStockLevels", &p)
	if len(p.UserErrors) > 0 { // more levels than one call takes, say: nothing was seeded
		t.Fatalf("setStockLevels: %v", p.UserErrors)
	}
	return codes
}

// availabilityAliases is a document of n aliases of availability over $s.
func availabilityAliases(n int) string {
	var b strings.Builder
	b.WriteString("query($s: [String!]!) {")
	for i := range n {
		fmt.Fprintf(&b, " a%d: availability(skus: $s) { available }", i)
	}
	b.WriteString(" }")
	return b.String()
}

// heaviestAnonymous returns the heaviest availability document the server
// accepts from an anonymous caller, over skus: the 330 aliases if
// the limits let it through, else as many aliases as the complexity limit
// allows (each costs len(skus) rows of one field).
func heaviestAnonymous(t *testing.T, url string, skus []string) []byte {
	t.Helper()
	for _, n := range []int{330, 20, 10} {
		body, _ := json.Marshal(map[string]any{"query": availabilityAliases(n), "variables": map[string]any{"s": skus}})
		r, err := postTo(url, "", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Errors) == 0 {
			t.Logf("heaviest anonymous document: %d aliases of availability over %d SKUs (%d KB)", n, len(skus), len(body)>>10)
			return body
		}
		t.Logf("%d aliases of availability over %d SKUs refused: %s %s", n, len(skus), r.errorCode(), r.Errors[0].Message)
	}
	t.Fatal("no availability document accepted")
	return nil
}

// postWithin POSTs body to /graphql as authorization, giving up after
// within (or when ctx ends): the attack's requests end with the test.
func postWithin(ctx context.Context, within time.Duration, url, authorization string, body []byte) (gqlResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return gqlResponse{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return gqlResponse{}, err
	}
	defer resp.Body.Close()
	out := gqlResponse{Status: resp.StatusCode}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// reserveLatencies reserves one unit of HOT n times in a row as the checkout
// token and returns the latencies, sorted, and how many failed. A reserve
// that takes 5 s counts as 5 s and a failure; after 30 s in all it stops.
func reserveLatencies(t *testing.T, url, token, checkout, prefix string, n int) ([]time.Duration, int) {
	t.Helper()
	out := make([]time.Duration, 0, n)
	failed := 0
	begin := time.Now()
	for i := 0; i < n && time.Since(begin) < 30*time.Second; i++ {
		body, _ := json.Marshal(map[string]any{"query": `mutation($in: ReserveInput!) { reserve(input: $in) { reservation { id } userErrors { code } } }`,
			"variables": map[string]any{"in": map[string]any{"checkoutId": checkout, "requestKey": fmt.Sprintf("%s-%d", prefix, i),
				"lines": []map[string]any{{"sku": "HOT", "location": "AMS", "quantity": 1}}}}})
		start := time.Now()
		r, err := postWithin(context.Background(), 5*time.Second, url, "Bearer "+token, body)
		out = append(out, time.Since(start))
		if err != nil || len(r.Errors) > 0 || !strings.Contains(string(r.Data["reserve"]), `"id"`) {
			failed++
			t.Logf("reserve %d after %v: %v %+v", i, out[len(out)-1].Round(time.Millisecond), err, r.Errors)
		}
		time.Sleep(20 * time.Millisecond)
	}
	slices.Sort(out)
	return out, failed
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// TestAnonymousLoadLeavesCheckoutsTheirShare is the availability attack
// against the real binary at its default limits: 8 anonymous clients send,
// as fast as they are answered, the heaviest anonymous document the limits
// allow over 500 distinct SKUs, while a checkout token reserves on the same
// instance. Before, that document was the 330 aliases of
// availability(skus: 500), cost 660 (each field 1): reserve p50 went from
// ~4 ms to seconds. Now a list field costs the rows it asks for, so at most
// 20 such aliases pass, and anonymous root fields use at most
// INVENTORY_DB_ANONYMOUS_CONNS of the request pool at once. The reserve
// must keep p50 < 50 ms and p99 < 250 ms, and the server's peak RSS may grow
// by less than 256 MiB. It does not run in parallel (like
// TestUploadMemoryBounded), and `make test` runs it alone after every other
// package (scripts/test.sh): the latencies must be the attack's, not those of
// other tests sharing the two cores (under a loaded CI run it measured p50
// 58 ms).
func TestAnonymousLoadLeavesCheckoutsTheirShare(t *testing.T) {
	s := setupBinary(t, map[string]string{
		// Eight attackers at full speed from one address stand for eight
		// addresses each within its budget; the checkout's budgets are
		// lifted so the test measures latency, not the limiter.
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0",
		"INVENTORY_RATE_LIMIT_CHECKOUT_WRITES": "0",
		"INVENTORY_CHECKOUT_MAX_LIVE_HOLDS":    "1000000",
		"INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU": "1000000",
	})
	skus := seedSKUs(t, s.testServer, 500)
	token := s.checkoutToken("cart-attack")
	const reserves = 150
	alone, failedAlone := reserveLatencies(t, s.url, token, "cart-attack", "alone", 50)
	if failedAlone > 0 {
		t.Fatalf("%d reserves failed without an attack", failedAlone)
	}

	body := heaviestAnonymous(t, s.url, skus)
	base := s.rss()
	stop := make(chan struct{})
	attackCtx, endAttack := context.WithCancel(context.Background())
	defer endAttack()
	var answered, failed atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := postWithin(attackCtx, time.Minute, s.url, "", body)
				if attackCtx.Err() != nil {
					return
				}
				if err == nil && len(r.Errors) == 0 {
					answered.Add(1)
					continue
				}
				failed.Add(1)
				firstFailure.CompareAndSwap(nil, fmt.Sprint(err, r.Errors))
			}
		})
	}
	peak := base
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				peak = max(peak, s.rss())
			}
		}
	}()
	time.Sleep(2 * time.Second) // the attack is in full swing
	start := time.Now()
	attacked, failedAttacked := reserveLatencies(t, s.url, token, "cart-attack", "attacked", reserves)
	elapsed := time.Since(start)
	close(stop)
	endAttack()
	wg.Wait()
	<-sampling

	p50, p99 := percentile(attacked, 0.5), percentile(attacked, 0.99)
	t.Logf("reserve alone: p50 %v p99 %v; under attack: p50 %v p99 %v max %v (%d reserves in %v, %d failed); %d anonymous answers, %d failed (first: %v); RSS %d MiB, peak %d MiB (+%d MiB)",
		percentile(alone, 0.5).Round(time.Microsecond), percentile(alone, 0.99).Round(time.Microsecond),
		p50.Round(time.Microsecond), p99.Round(time.Microsecond), attacked[len(attacked)-1].Round(time.Microsecond), len(attacked), elapsed.Round(time.Millisecond), failedAttacked,
		answered.Load(), failed.Load(), firstFailure.Load(), base>>20, peak>>20, (peak-base)>>20)
	if failedAttacked > 0 {
		t.Errorf("%d of %d reserves failed or took 5 s under attack", failedAttacked, len(attacked))
	}
	if p50 >= 50*time.Millisecond || p99 >= 250*time.Millisecond {
		t.Errorf("reserve under attack: p50 %v, p99 %v; want p50 < 50 ms and p99 < 250 ms", p50, p99)
	}
	if peak-base >= 256<<20 {
		t.Errorf("peak RSS grew by %d MiB under attack; want under 256 MiB", (peak-base)>>20)
	}
	if answered.Load() == 0 {
		t.Errorf("no anonymous request was answered: the attack measured nothing")
	}
	if n := s.count(`SELECT count(*) FROM reservations WHERE checkout_id = 'cart-attack'`); failedAttacked == 0 && n != 50+reserves {
		t.Errorf("%d reservations in SQL, want %d", n, 50+reserves)
	}
}
