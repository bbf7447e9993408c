package e2e

import (
	"context"
	"testing"
	"time"
)

// TestShutdownFinishesInFlightRequests: a request that is waiting on the
// database when the shutdown signal arrives still completes, and only then
// does the server stop.
func TestShutdownFinishesInFlightRequests(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 5)

	// Hold the balance row so the adjustment below has to wait.
	tx, err := ts.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(context.Background(), `SELECT FROM balances FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   gqlResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := gqlTo(ts.url, ts.admin, `mutation { adjustStock(input: {sku: "HP", location: "AMS", delta: -1, reason: "damaged", reference: "x"}) { balance { onHand } userErrors { code } } }`, nil)
		done <- result{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // the request is now blocked on the row
	stopped := make(chan error, 1)
	go func() { stopped <- ts.shutdown() }()
	time.Sleep(300 * time.Millisecond) // the signal has arrived
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || len(res.r.Errors) > 0 || string(res.r.Data["adjustStock"]) != `{"balance":{"onHand":4},"userErrors":[]}` {
		t.Fatalf("in-flight request during shutdown: %+v %v", res.r, res.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
