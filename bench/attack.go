package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// attackers is how many anonymous clients the "under attack" row runs.
const attackers = 8

// attackSKUs is how many SKUs each alias of the attack document asks for:
// availability's most.
const attackSKUs = 500

// attackResult is the "under attack" row: a checkout's reserve alone and
// while attackers anonymous clients send, as fast as they are answered, the
// heaviest anonymous document the server's limits accept.
type attackResult struct {
	doc             string     // what the attack document is
	alone, attacked loadResult // the checkout's reserves
	anon            loadResult // the attackers' requests
	rssMB           float64    // server peak RSS while attacked
}

// attackDocument is aliases aliases of availability(skus: $s) { available }
// over attackSKUs spread SKUs, as a request body.
func (b *bench) attackDocument(aliases int) []byte {
	var q strings.Builder
	q.WriteString("query($s: [String!]!) {")
	for i := range aliases {
		fmt.Fprintf(&q, " a%d: availability(skus: $s) { available }", i)
	}
	q.WriteString(" }")
	body, _ := json.Marshal(map[string]any{"query": q.String(), "variables": map[string]any{"s": b.cat.spread[:attackSKUs]}})
	return body
}

// heaviestAnonymous returns the heaviest attack document the server
// accepts from an anonymous caller: the 330 aliases if the limits
// let it through, else the most aliases that pass the complexity limit.
func (b *bench) heaviestAnonymous(ctx context.Context) ([]byte, string, error) {
	for _, n := range []int{330, 160, 80, 40, 20, 10, 5, 2, 1} {
		body := b.attackDocument(n)
		resp, err := b.gql.post(ctx, body, "", nil)
		if err != nil {
			return nil, "", fmt.Errorf("attack document: %w", err)
		}
		if !bytes.Contains(resp, errorsKey) {
			return body, fmt.Sprintf("%d aliases × availability of %d SKUs", n, attackSKUs), nil
		}
	}
	return nil, "", fmt.Errorf("no attack document accepted")
}

// longAliasDocument is the bounded-by-cost issue's document: 20 aliases of
// availability over one SKU repeated attackSKUs times, each selecting
// `available` under a 45,000-character alias (cost 20,000, within the
// complexity limit; its answer would be 450 MB). The server must refuse it
// before running it.
func (b *bench) longAliasDocument() []byte {
	var q strings.Builder
	q.WriteString("query($s: [String!]!) {")
	alias := strings.Repeat("a", 45_000)
	for i := range 20 {
		fmt.Fprintf(&q, " x%d: availability(skus: $s) { %s%d: available }", i, alias, i)
	}
	q.WriteString(" }")
	skus := make([]string, attackSKUs)
	for i := range skus {
		skus[i] = b.cat.spread[0]
	}
	body, _ := json.Marshal(map[string]any{"query": q.String(), "variables": map[string]any{"s": skus}})
	return body
}

// refusedForCost is what the long-alias document must be answered with.
var refusedForCost = []byte(`"COMPLEXITY_LIMIT_EXCEEDED"`)

// anonymousOp sends, anonymously, heaviest from the even clients (an answer
// with errors is a failure) and longAlias from the odd ones (an answer that
// is not a COMPLEXITY_LIMIT_EXCEEDED refusal is a failure).
func anonymousOp(b *bench, heaviest, longAlias []byte) op {
	bufs := make([][]byte, attackers)
	return func(ctx context.Context, c int) error {
		body := heaviest
		if c%2 == 1 {
			body = longAlias
		}
		var err error
		if bufs[c], err = b.gql.post(ctx, body, "", bufs[c]); err != nil {
			if c%2 == 1 && strings.Contains(err.Error(), string(refusedForCost)) {
				return nil // refused before GraphQL, with a 400
			}
			return err
		}
		switch {
		case c%2 == 1 && !bytes.Contains(bufs[c], refusedForCost):
			return fmt.Errorf("long-alias document not refused for its cost: %.200s", bufs[c])
		case c%2 == 0 && bytes.Contains(bufs[c], errorsKey):
			return fmt.Errorf("attack document refused: %.200s", bufs[c])
		}
		return nil
	}
}

// runAttack measures one checkout's reserves (checkout token, spread SKUs)
// for d alone, then for d while the attackers run (they start a second
// earlier, so the reserves meet the attack in full swing).
func (b *bench) runAttack(ctx context.Context, d time.Duration) (attackResult, error) {
	body, doc, err := b.heaviestAnonymous(ctx)
	if err != nil {
		return attackResult{}, err
	}
	r := attackResult{doc: doc}
	r.alone = closedLoop(ctx, 1, d, reserveOp(otherSKU, true)(b, 1_000_001, 1))
	rss := sampleRSS(b.srv.cmd.Process.Pid)
	bg := make(chan loadResult, 1)
	go func() { bg <- closedLoop(ctx, attackers, d+time.Second, anonymousOp(b, body, b.longAliasDocument())) }()
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	r.attacked = closedLoop(ctx, 1, d, reserveOp(otherSKU, true)(b, 1_000_002, 1))
	r.anon = <-bg
	r.rssMB = rss.done()
	return r, ctx.Err()
}

// attackMarkdown renders the row.
func (r *attackResult) markdown() string {
	var b strings.Builder
	b.WriteString("\n## Under attack\n\n")
	fmt.Fprintf(&b, "One checkout (token) reserving, alone and while %d anonymous clients send, as fast as they are answered, half of them %s (the heaviest anonymous document the limits accept), half the 880 KB long-alias document (20 aliases of 45,000 characters over one SKU 500 times: its answer would be 450 MB; it must be refused for its cost).\n\n", attackers, r.doc)
	b.WriteString("| reserve alone p50 | p99 | reserves/s | under attack p50 | p99 | reserves/s | reserves failed | anonymous answers/s | anonymous failed | server RSS MB |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	p50, p99 := r.attacked.lat.quantile(0.5), r.attacked.lat.quantile(0.99)
	fmt.Fprintf(&b, "| %.2f | %.2f | %.0f | %.2f (target < 50 %s) | %.2f (target < 250 %s) | %.0f | %d | %.1f | %d | %.0f |\n",
		r.alone.lat.quantile(0.5), r.alone.lat.quantile(0.99), r.alone.opsPerSec(),
		p50, mark(r.attacked.lat.n > 0 && p50 < 50), p99, mark(r.attacked.lat.n > 0 && p99 < 250), r.attacked.opsPerSec(),
		r.alone.failed+r.attacked.failed, r.anon.opsPerSec(), r.anon.failed, r.rssMB)
	return b.String()
}
