package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestVariablesAreBoundedBeforeDecoding: gqlgen decodes a request's
// variables into generic Go values at about 40-50 times their JSON size,
// so the attacker's 1 MB body `{"query":"{__typename}","variables":{"x":
// [{"a":0} ×131,000]}}` took ~50 MB each: 10 at once 541 MB, 100 at once
// 5.1 GB, all answered 200. Now a caller without a key may send at most
// MaxVariableValues (10,000) values, counted without decoding: 20 at once
// are each refused 400 and the server's peak RSS grows by less than 100
// MB; a storefront's 500-SKU availability and an admin's large variables
// are still served.
func TestVariablesAreBoundedBeforeDecoding(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0",
		// 20 bodies of 1 MiB at once pass the bytes-in-flight bound
		// (TestBytesInFlightPerAddressAreBounded) only when it is lifted:
		// this measures the variables' bound alone.
		"INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP": "0",
	})
	body := []byte(`{"query":"{__typename}","variables":{"x":[` + strings.TrimSuffix(strings.Repeat(`{"a":0},`, 131_000), ",") + `]}}`)
	t.Logf("body: %d bytes", len(body))
	base := s.peakRSS()
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			r, err := postTo(s.url, "", "application/json", body)
			if err != nil {
				statuses[i] = -1
				return
			}
			statuses[i] = r.Status
		})
	}
	wg.Wait()
	grew := s.peakRSS() - base
	t.Logf("20 at once: statuses %v, peak RSS %+d MB", statuses, grew>>20)
	for _, st := range statuses {
		if st != http.StatusBadRequest {
			t.Fatalf("a body of 131,000 variable values, anonymous: %d, want 400", st)
		}
	}
	if grew > 100<<20 {
		t.Fatalf("20 such bodies grew the server by %d MB", grew>>20)
	}
	// The same over GET's query string.
	get := s.getGraphQL(map[string][]string{"query": {"{__typename}"}, "variables": {`{"x":[` + strings.TrimSuffix(strings.Repeat(`1,`, 20_000), ",") + `]}`}})
	if get.status != http.StatusBadRequest {
		t.Fatalf("a GET with 20,000 variable values: %d, want 400", get.status)
	}
	skus := make([]string, 500)
	for i := range skus {
		skus[i] = fmt.Sprint("SKU-", i)
	}
	if r := s.gql("", `query($s:[String!]!){ availability(skus:$s){ sku } }`, map[string]any{"s": skus}); len(r.Errors) > 0 {
		t.Fatalf("availability of 500 SKUs: %+v", r.Errors)
	}
	if r := s.post("Bearer "+s.admin, "application/json", bytes.ReplaceAll(body, []byte(`{__typename}`), []byte(`{ __typename }`))); r.Status != http.StatusOK {
		t.Fatalf("an admin's large variables: %d %+v", r.Status, r.Errors)
	}
}
