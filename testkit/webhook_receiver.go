package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WebhookReceiver is a webhook consumer on loopback: it records every request
// and answers 204, except those it was told to fail (FailNext) and the one it
// was told to hold (HoldNext), which waits until Release or until its sender
// gives up (the sender's shutdown or timeout).
type WebhookReceiver struct {
	URL string

	mu         sync.Mutex
	got        []WebhookRequest
	failures   int
	failStatus int
	holdNext   chan struct{} // closed when the held request has arrived
	release    chan struct{}
}

// WebhookRequest is one request a WebhookReceiver saw.
type WebhookRequest struct {
	ID, Timestamp, Signature string // the webhook-* headers
	Body                     []byte
	Type                     string
	Seq                      int64
	SKU                      string
	// Status is how the receiver answered: 0 when the sender hung up on a
	// held request first.
	Status int
}

// Delivered says whether the receiver took the delivery (a 2xx answer).
func (q WebhookRequest) Delivered() bool { return q.Status >= 200 && q.Status < 300 }

// NewWebhookReceiver starts a receiver, closed at cleanup.
func NewWebhookReceiver(t testing.TB) *WebhookReceiver {
	r := &WebhookReceiver{release: make(chan struct{})}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	t.Cleanup(r.Release)
	r.URL = srv.URL + "/hooks"
	return r
}

// FailNext answers the next n requests with status.
func (r *WebhookReceiver) FailNext(n, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures, r.failStatus = n, status
}

// ServeHTTP records the request, fails or holds it if asked, and answers.
func (r *WebhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var body struct {
		Type string `json:"type"`
		Data struct {
			Seq int64  `json:"seq"`
			SKU string `json:"sku"`
		} `json:"data"`
	}
	_ = json.Unmarshal(b, &body) // a body that is not ours records zero values
	got := WebhookRequest{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
		Signature: req.Header.Get("webhook-signature"), Body: b, Type: body.Type, Seq: body.Data.Seq, SKU: body.Data.SKU,
		Status: http.StatusNoContent}

	r.mu.Lock()
	if r.failures > 0 {
		r.failures--
		got.Status = r.failStatus
	}
	held := r.holdNext
	r.holdNext = nil
	release := r.release
	r.mu.Unlock()
	if held != nil {
		close(held)
		select {
		case <-release:
		case <-req.Context().Done():
			got.Status = 0
		}
	}
	r.mu.Lock()
	r.got = append(r.got, got)
	r.mu.Unlock()
	if got.Status != 0 {
		w.WriteHeader(got.Status)
	}
}

// HoldNext holds the next request until Release; the channel is closed when
// that request has arrived.
func (r *WebhookReceiver) HoldNext() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holdNext = make(chan struct{})
	return r.holdNext
}

// Release lets a held request (and any later one) be answered.
func (r *WebhookReceiver) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

// Requests is every request so far, in the order they ended.
func (r *WebhookReceiver) Requests() []WebhookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]WebhookRequest(nil), r.got...)
}

// WebhookOrderProblem says what is wrong with reqs as the deliveries of
// exactly the events want (their seqs, ascending), or "" when nothing is:
// every seq answered, each first answered in seq order, no other seq, and a
// webhook-id repeated only with its seq (so a consumer that de-duplicates
// by webhook-id sees each event once).
func WebhookOrderProblem(reqs []WebhookRequest, want []int64) string {
	idOf := map[int64]string{}
	answered := map[int64]bool{}
	var firsts []int64
	for _, q := range reqs {
		if id, ok := idOf[q.Seq]; ok && id != q.ID {
			return fmt.Sprintf("seq %d came with two webhook-ids: %s, %s", q.Seq, id, q.ID)
		}
		idOf[q.Seq] = q.ID
		if !q.Delivered() || answered[q.Seq] {
			continue // failed or cut off, or a redelivery under the same webhook-id
		}
		if n := len(firsts); n > 0 && firsts[n-1] > q.Seq {
			return fmt.Sprintf("seq %d answered after seq %d", q.Seq, firsts[n-1])
		}
		answered[q.Seq] = true
		firsts = append(firsts, q.Seq)
	}
	if !slices.Equal(firsts, want) {
		return fmt.Sprintf("answered seqs %v, want %v", firsts, want)
	}
	return ""
}

// PublishedSeqs are the seqs of sku's published stock events, ascending:
// what a webhook endpoint selecting sku must be delivered.
func PublishedSeqs(t TB, pool *pgxpool.Pool, sku string) []int64 {
	t.Helper()
	rows, _ := pool.Query(context.Background(), `SELECT e.seq FROM stock_events e JOIN skus s ON s.id = e.sku_id
		WHERE s.code = $1 AND e.seq IS NOT NULL ORDER BY e.seq`, sku)
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("published seqs of %s: %v", sku, err)
	}
	return seqs
}
