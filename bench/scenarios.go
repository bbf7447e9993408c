package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
)

// baseline is one pgbench script, or a closed loop of HTTP requests to a
// child server of the bench's: the work our scenarios are compared with.
type baseline struct {
	key, name, script string
	// http, when set, makes this baseline a closed loop of these requests
	// to the ceiling handler (ceiling.go) or the naive server (naive.go)
	// instead of a pgbench script.
	http func(b *bench, cell, clients int) op
	// naive marks the naive server's cells: they need its child and are
	// restocked after each cell (resetNaive).
	naive bool
	// writes marks the cells that make holds, whose CPU per 1,000 holds
	// is measured: pgbench's claims and the naive server's.
	writes bool
}

// The order is the order of the cells at each client count: each write
// row's pgbench cell, then its naive cell, then ours (after the later).
var baselines = []baseline{
	{key: "spread", name: "pgbench: claim CTE, 10,000 SKUs", script: "claim_spread.sql", writes: true},
	{key: "naive-spread", name: "naive: net/http + pgxpool, claim CTE + hold row, 10,000 SKUs", http: naiveReserveOp(naiveSpreadSKU), naive: true, writes: true},
	{key: "naive-confirm", name: "naive: reserve → confirm pairs, 10,000 SKUs", http: naiveReserveConfirmOp, naive: true, writes: true},
	{key: "hot", name: "pgbench: claim CTE, one SKU", script: "claim_hot.sql", writes: true},
	{key: "naive-hot", name: "naive: claim CTE + hold row, one SKU", http: naiveReserveOp(naiveHotSKU), naive: true, writes: true},
	{key: "codes", name: "pgbench: code claim, SKIP LOCKED", script: "claim_code.sql", writes: true},
	{key: "naive-codes", name: "naive: code claim SKIP LOCKED + hold row", http: naiveReserveOp(naiveCodesSKU), naive: true, writes: true},
	{key: "read", name: "pgbench: 20-SKU balance read", script: "read20.sql"},
	{key: "ceiling-post", name: "ceiling: net/http + encoding/json from a map, POST", http: availabilityOp(ceiling)},
	{key: "ceiling-get", name: "ceiling: net/http + encoding/json from a map, APQ GET", http: availabilityGetOp(ceiling)},
}

// target is a goal to show next to a ratio; the bench never enforces it.
type target struct {
	clients int
	ratio   float64
}

// scenario is one of our rows: an operation over HTTP/GraphQL, compared
// with the pgbench baseline named by base, for availability also with the
// ceiling baseline named by ceiling, and for the write rows with the naive
// server's baseline named by naive. It runs right after the last of them.
type scenario struct {
	key, name, base, ceiling, naive string
	target, ceilingTarget           target
	// make returns the per-request function for one cell; cell makes
	// request keys unique across cells.
	make func(b *bench, cell, clients int) op
	// background, if set, runs alongside the cell with as many clients and
	// is not measured: the load the row is measured under.
	background func(b *bench, cell, clients int) op
}

// after is the baseline the scenario runs after: the last, in the order
// of baselines, of those it is compared with.
func (sc scenario) after() string {
	last, at := "", -1
	for i, base := range baselines {
		if (base.key == sc.base || base.key == sc.ceiling || base.key == sc.naive) && i > at {
			last, at = base.key, i
		}
	}
	return last
}

// writes says whether the scenario is a write row: one compared with the
// naive server, whose CPU per 1,000 holds is measured.
func (sc scenario) writes() bool { return sc.naive != "" }

var scenarios = []scenario{
	{key: "spread-token", name: "reserve 1 of 10,000 SKUs (checkout token)", base: "spread", naive: "naive-spread", target: target{32, 0.5}, make: reserveOp(spreadSKU, true)},
	{key: "spread-service", name: "reserve 1 of 10,000 SKUs (service key)", base: "spread", naive: "naive-spread", target: target{32, 0.5}, make: reserveOp(spreadSKU, false)},
	{key: "reserve-confirm", name: "reserve → confirm pairs (token, then service key)", base: "spread", naive: "naive-confirm", make: reserveConfirmOp},
	{key: "hot", name: "reserve on one hot SKU (checkout token)", base: "hot", naive: "naive-hot", target: target{64, 5}, make: reserveOp(func(b *bench) string { return b.cat.hot }, true)},
	{key: "codes", name: "reserve a CODES SKU (checkout token)", base: "codes", naive: "naive-codes", target: target{32, 0.5}, make: reserveOp(func(b *bench) string { return b.cat.codesSKU }, true)},
	{key: "availability-under-load", name: "availability of 20 SKUs (anonymous), as many clients reserving other SKUs", base: "read",
		make: availabilityOp(ours), background: reserveOp(otherSKU, true)},
	{key: "availability", name: "availability of 20 SKUs (anonymous, POST)", base: "read", ceiling: "ceiling-post",
		target: target{32, 0.45}, ceilingTarget: target{32, 0.8}, make: availabilityOp(ours)},
	{key: "availability-get", name: "availability of a 20-SKU page (anonymous, APQ GET)", base: "read", ceiling: "ceiling-get",
		target: target{32, 0.45}, ceilingTarget: target{32, 0.8}, make: availabilityGetOp(ours)},
}

const holdTTL = "1800" // long enough that no hold expires while the bench runs; a checkout token's most

func spreadSKU(b *bench) string { return b.cat.spread[rand.IntN(len(b.cat.spread))] }

// readSKU and otherSKU split the spread SKUs in halves: storefront reads
// take the first, the reserve load under which reads are also measured the
// second, so that load is on other SKUs.
func readSKU(b *bench) string { return b.cat.spread[rand.IntN(len(b.cat.spread)/2)] }

func otherSKU(b *bench) string {
	half := len(b.cat.spread) / 2
	return b.cat.spread[half+rand.IntN(len(b.cat.spread)-half)]
}

// clientState is one load client's reusable buffers.
type clientState struct {
	body, resp []byte
	n          int
}

// appendReserve appends a reserve request for one unit of sku. The body is
// assembled from constant pieces into a reused buffer.
func appendReserve(dst []byte, checkoutID, requestKey, ttl, sku, loc string) []byte {
	dst = append(dst, `{"query":"mutation($in:ReserveInput!){reserve(input:$in){reservation{id} userErrors{code}}}","variables":{"in":{"checkoutId":"`...)
	dst = append(dst, checkoutID...)
	dst = append(dst, `","requestKey":"`...)
	dst = append(dst, requestKey...)
	dst = append(dst, `","ttlSeconds":`...)
	dst = append(dst, ttl...)
	dst = append(dst, `,"lines":[{"sku":"`...)
	dst = append(dst, sku...)
	dst = append(dst, `","location":"`...)
	dst = append(dst, loc...)
	return append(dst, `","quantity":1}]}}}`...)
}

// credentials returns client c's checkoutId and bearer: a shopper's
// checkout token as a browser would send it, or the service key.
func (b *bench) credentials(c int, token bool) (string, string, error) {
	if token {
		return b.shoppers.next(c)
	}
	return "svc-" + strconv.Itoa(c), b.serviceKey, nil
}

// reserveOp reserves one unit of pick's SKU per request, each with a fresh
// requestKey.
func reserveOp(pick func(*bench) string, token bool) func(b *bench, cell, clients int) op {
	return func(b *bench, cell, clients int) op {
		return reserveVia(b, pick, token, cell, clients, func(int) *gqlClient { return b.gql })
	}
}

// reserveVia is reserveOp's request sent by client c to the server via(c)
// names: one instance, or one of several (the scale-out row).
func reserveVia(b *bench, pick func(*bench) string, token bool, cell, clients int, via func(c int) *gqlClient) op {
	st := make([]clientState, clients)
	prefix := "c" + strconv.Itoa(cell) + "-"
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		co, bearer, err := b.credentials(c, token)
		if err != nil {
			return err
		}
		s.body = appendReserve(s.body[:0], co, prefix+strconv.Itoa(s.n), holdTTL, pick(b), b.cat.locCode)
		if s.resp, err = via(c).post(ctx, s.body, bearer, s.resp); err != nil {
			return err
		}
		return mutationOK(s.resp)
	}
}

var idKey = []byte(`"id":"`)

// reserveConfirmOp is a whole checkout: the browser reserves with its
// token, the payment webhook confirms with the service key. One op is one
// pair.
func reserveConfirmOp(b *bench, cell, clients int) op {
	st := make([]clientState, clients)
	prefix := "c" + strconv.Itoa(cell) + "-"
	return func(ctx context.Context, c int) error {
		s := &st[c]
		s.n++
		key := prefix + strconv.Itoa(s.n)
		co, token, err := b.shoppers.next(c)
		if err != nil {
			return err
		}
		s.body = appendReserve(s.body[:0], co, key, holdTTL, spreadSKU(b), b.cat.locCode)
		if s.resp, err = b.gql.post(ctx, s.body, token, s.resp); err != nil {
			return err
		}
		if err := mutationOK(s.resp); err != nil {
			return err
		}
		id, ok := jsonString(s.resp, idKey)
		if !ok {
			return fmt.Errorf("reserve answered without an id: %.200s", s.resp)
		}
		s.body = append(s.body[:0], `{"query":"mutation($in:ConfirmReservationInput!){confirmReservation(input:$in){reservation{status} userErrors{code}}}","variables":{"in":{"id":"`...)
		s.body = append(s.body, id...)
		s.body = append(s.body, `","orderRef":"ORD-`...)
		s.body = append(s.body, co...)
		s.body = append(s.body, '-')
		s.body = append(s.body, key...)
		s.body = append(s.body, `"}}}`...)
		if s.resp, err = b.gql.post(ctx, s.body, b.serviceKey, s.resp); err != nil {
			return err
		}
		return mutationOK(s.resp)
	}
}

var availabilityKey = []byte(`{"data":{"availability":[`)

// availabilityOp reads 20 random SKUs anonymously with POST, as a
// storefront page does, from the server that client picks: ours, or the
// ceiling.
func availabilityOp(client func(*bench) *gqlClient) func(b *bench, cell, clients int) op {
	return func(b *bench, cell, clients int) op {
		st := make([]clientState, clients)
		g := client(b)
		return func(ctx context.Context, c int) error {
			s := &st[c]
			s.body = append(s.body[:0], `{"query":"`+availabilityQuery+`","variables":{"s":[`...)
			for i := range 20 {
				if i > 0 {
					s.body = append(s.body, ',')
				}
				s.body = append(s.body, '"')
				s.body = append(s.body, readSKU(b)...)
				s.body = append(s.body, '"')
			}
			s.body = append(s.body, `]}}`...)
			var err error
			if s.resp, err = g.post(ctx, s.body, "", s.resp); err != nil {
				return err
			}
			return availabilityOK(s.resp)
		}
	}
}

func availabilityOK(resp []byte) error {
	if len(resp) < len(availabilityKey) || string(resp[:len(availabilityKey)]) != string(availabilityKey) {
		return fmt.Errorf("availability: %.200s", resp)
	}
	return nil
}

// pageSKUs is how many SKUs one storefront page shows.
const pageSKUs = 20

// availabilityPages are the persisted-query GETs of a storefront's pages:
// the read half of the spread SKUs cut into pages of pageSKUs, each one
// GET /graphql?variables=…&extensions=… (the same URL every time it is
// shown, as a CDN sees it).
func availabilityPages(b *bench) []string {
	ext := "&extensions=" + url.QueryEscape(`{"persistedQuery":{"version":1,"sha256Hash":"`+availabilityHash+`"}}`)
	half := b.cat.spread[:len(b.cat.spread)/2]
	var pages []string
	for i := 0; i+pageSKUs <= len(half); i += pageSKUs {
		vars, _ := json.Marshal(map[string]any{"s": half[i : i+pageSKUs]})
		pages = append(pages, "variables="+url.QueryEscape(string(vars))+ext)
	}
	return pages
}

// registerPersisted sends the availability document's text once with its
// hash, as an APQ client does after PersistedQueryNotFound, so the GETs
// that follow carry the hash alone.
func registerPersisted(ctx context.Context, g *gqlClient) error {
	body := `{"query":"` + availabilityQuery + `","variables":{"s":[]},"extensions":{"persistedQuery":{"version":1,"sha256Hash":"` + availabilityHash + `"}}}`
	resp, err := g.post(ctx, []byte(body), "", nil)
	if err != nil {
		return fmt.Errorf("register the persisted query: %w", err)
	}
	if bytes.Contains(resp, errorsKey) {
		return fmt.Errorf("register the persisted query: %.300s", resp)
	}
	return nil
}

// availabilityGetOp reads a random storefront page with a persisted-query
// GET, anonymously, from the server that client picks.
func availabilityGetOp(client func(*bench) *gqlClient) func(b *bench, cell, clients int) op {
	return func(b *bench, cell, clients int) op {
		st := make([]clientState, clients)
		g := client(b)
		pages := availabilityPages(b)
		if err := registerPersisted(context.Background(), g); err != nil {
			logf("  %v", err) // every GET then fails, and says why
		}
		return func(ctx context.Context, c int) error {
			s := &st[c]
			var err error
			if s.resp, err = g.get(ctx, pages[rand.IntN(len(pages))], s.resp); err != nil {
				return err
			}
			return availabilityOK(s.resp)
		}
	}
}

func ours(b *bench) *gqlClient    { return b.gql }
func ceiling(b *bench) *gqlClient { return b.ceiling.gql }
