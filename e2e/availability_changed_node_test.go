package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAvailabilityChangedWithNodeClients watches a SKU without a token with
// real third-party clients running in Node, as a product page would: the
// graphql-ws package over WebSocket and the graphql-sse package over SSE
// (testdata/node-client; make test installs them). Each prints the current
// value first, then values that only fall, the last the database's.
func TestAvailabilityChangedWithNodeClients(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for this test: install Node.js (make test runs npm ci in testdata/node-client)")
	}
	ts := setup(t)
	ts.seed("NODE", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type run struct {
		cmd *exec.Cmd
		out syncBuffer
		err bytes.Buffer
	}
	runs := map[string]*run{}
	for _, tr := range []string{"ws", "sse"} {
		url := ts.url + "/graphql"
		if tr == "ws" {
			url = "ws" + strings.TrimPrefix(url, "http")
		}
		r := &run{cmd: exec.CommandContext(ctx, "node", "availability.mjs", tr, url, "NODE", "7")}
		r.cmd.Dir = "testdata/node-client"
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs[tr] = r
	}
	for tr, r := range runs {
		waitUntil(t, 20*time.Second, tr+" client's first value", func() bool { return strings.Contains(r.out.String(), "\n") })
	}
	for i := range 3 {
		ts.mustData(ts.gql(ts.service, `mutation($c: String!) { reserve(input: {checkoutId: $c, requestKey: "k", lines: [{sku: "NODE", quantity: 1}]}) { userErrors { code } } }`,
			map[string]any{"c": fmt.Sprint("node-", i)}), "reserve", new(map[string]any))
		time.Sleep(100 * time.Millisecond)
	}
	final := ts.sqlAvailability("NODE")
	for tr, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("%s client: %v\nstdout: %s\nstderr: %s", tr, err, r.out.String(), r.err.String())
		}
		var got []liveAvailability
		sc := bufio.NewScanner(strings.NewReader(r.out.String()))
		for sc.Scan() {
			var a liveAvailability
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Fatalf("%s: line %q: %v", tr, sc.Text(), err)
			}
			got = append(got, a)
		}
		if len(got) < 2 || got[0].Available != 10 || got[len(got)-1] != final {
			t.Fatalf("%s client: %+v, want 10 first and %+v last", tr, got, final)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Available >= got[i-1].Available {
				t.Fatalf("%s client: %+v went backwards", tr, got)
			}
		}
		t.Logf("%s client: %+v", tr, got)
	}
}

// browserShim stands in for what a browser gives the client guide's product
// page snippet: a global WebSocket (the ws package's) and a document whose
// #stock element prints what is written into it.
const browserShim = `import WebSocket from 'ws';
globalThis.WebSocket = WebSocket;
globalThis.document = { querySelector: () => ({ set textContent(v) { console.log(v); } }) };
`

// TestDocsJSAvailability runs the client guide's product page snippet (the
// ```js test block on availabilityChanged) under Node, as browser code with
// browserShim, against a test server with the demo catalog: it shows the
// current count, then the count after a reserve.
func TestDocsJSAvailability(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for this test: install Node.js (make test runs npm ci in testdata/node-client)")
	}
	var snippets []docBlock
	for _, file := range docFiles(t) {
		for _, b := range fencedBlocks(t, file) {
			if b.is("js") && strings.Contains(b.text, "availabilityChanged") {
				snippets = append(snippets, b)
			}
		}
	}
	if len(snippets) != 1 {
		t.Fatalf("want exactly one ```js test block on availabilityChanged in docs/, found %d", len(snippets))
	}
	snippet := snippets[0]
	if strings.Contains(snippet.text, "Authorization") || strings.Contains(snippet.text, "from 'ws'") {
		t.Fatalf("%s:%d: a product page's snippet needs no token and no ws package", snippet.file, snippet.line)
	}
	ts := setup(t)
	ts.cli("demo")
	var avail []struct{ Available int }
	ts.mustData(ts.gql("", `{ availability(skus: ["USB-C-CABLE"]) { available } }`, nil), "availability", &avail)
	before := avail[0].Available

	// Written inside testdata/node-client so that its node_modules resolve;
	// imports come first in a module, so the shim is a module of its own.
	shim, err := os.CreateTemp("testdata/node-client", "docs-shim-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(shim.Name()) })
	shim.WriteString(browserShim)
	shim.Close()
	f, err := os.CreateTemp("testdata/node-client", "docs-snippet-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	wsURL := "ws" + strings.TrimPrefix(ts.url, "http") + "/graphql"
	f.WriteString(strings.ReplaceAll(snippet.text, "ws://localhost:8080/graphql", wsURL))
	f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--import", "./"+filepath.Base(shim.Name()), filepath.Base(f.Name()))
	cmd.Dir = "testdata/node-client"
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	waitUntil(t, 15*time.Second, fmt.Sprintf("the page to show %d left", before), func() bool {
		if o := out.String(); strings.Contains(o, "rror") {
			t.Fatalf("%s:%d: the snippet printed an error:\n%s", snippet.file, snippet.line, o)
		}
		return strings.Contains(out.String(), fmt.Sprintf("%d left\n", before))
	})
	ts.mustData(ts.gql(ts.service, `mutation { reserve(input: {checkoutId: "page", requestKey: "k", lines: [{sku: "USB-C-CABLE", quantity: 1}]}) { userErrors { code } } }`, nil),
		"reserve", new(map[string]any))
	waitUntil(t, 15*time.Second, fmt.Sprintf("the page to show %d left", before-1), func() bool { return strings.Contains(out.String(), fmt.Sprintf("%d left\n", before-1)) })
	if strings.Contains(out.String(), "rror") {
		t.Fatalf("%s:%d: the snippet printed an error:\n%s", snippet.file, snippet.line, out.String())
	}
	t.Logf("%s:%d: the page showed:\n%s", snippet.file, snippet.line, out.String())
}

// TestAvailabilityChangedLocations: with locations, values sum over those
// only, and a change elsewhere sends nothing.
func TestAvailabilityChangedLocations(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("TWO", 4)
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "RTM", name: "Rotterdam", priority: 2}) { userErrors { code } } }`, nil), "createLocation", new(map[string]any))
	receive := func(loc, ref string) {
		ts.mustData(ts.gql(ts.admin, `mutation($l: String!, $r: String!) { receiveStock(input: {sku: "TWO", location: $l, quantity: 3, reference: $r}) { userErrors { code } } }`,
			map[string]any{"l": loc, "r": ref}), "receiveStock", new(map[string]any))
	}
	receive("RTM", "r1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ams := sseAvailability(t, ctx, ts.url, map[string]any{"skus": []string{"TWO"}, "locations": []string{"AMS"}})
	all := sseAvailability(t, ctx, ts.url, map[string]any{"skus": []string{"TWO"}})
	next := func(c <-chan timedAvailability, within time.Duration) (liveAvailability, bool) {
		select {
		case a, ok := <-c:
			return a.liveAvailability, ok
		case <-time.After(within):
			return liveAvailability{}, false
		}
	}
	if a, _ := next(ams, 5*time.Second); a.OnHand != 4 {
		t.Fatalf("AMS only: first %+v, want 4 on hand", a)
	}
	// The first value may come from the instance's in-memory copy, at most
	// its bound (INVENTORY_AVAILABILITY_MAX_LAG) behind the receipt at RTM
	// just made: the receipt's event follows it within the bound.
	for a, _ := next(all, 5*time.Second); a.OnHand != 7; a, _ = next(all, 5*time.Second) {
		if a.OnHand != 4 {
			t.Fatalf("every location: %+v, want 4 on hand (before the receipt at RTM reached the copy), then 7", a)
		}
	}
	receive("RTM", "r2")
	if a, _ := next(all, 5*time.Second); a.OnHand != 10 {
		t.Fatalf("every location after a receipt at RTM: %+v, want 10 on hand", a)
	}
	if a, ok := next(ams, time.Second); ok {
		t.Fatalf("AMS only: sent %+v for a change at RTM", a)
	}
	receive("AMS", "r3")
	if a, _ := next(ams, 5*time.Second); a.OnHand != 7 {
		t.Fatalf("AMS only after a receipt at AMS: %+v, want 7 on hand", a)
	}
}

// TestAvailabilityChangedSpendsAnonymousBudget: each availabilityChanged
// subscription without a token spends one read of its address's anonymous
// budget, over WebSocket as over SSE: past it, RATE_LIMITED (socket) or 429.
func TestAvailabilityChangedSpendsAnonymousBudget(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "4"})
	ts.seed("BUDGET", 1)
	vars := map[string]any{"skus": []string{"BUDGET"}}
	c := dialWS(t, ts.url, "", false) // the upgrade: one read
	c.ack()
	c.subscribe("1", availabilityChangedSub, vars) // two
	c.subscribe("2", availabilityChangedSub, vars) // three
	for _, id := range []string{"1", "2"} {
		if got := c.outcome(id); got != "" {
			t.Fatalf("subscription %s within the budget: %s", id, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp := openSSE(t, ctx, ts.url, "", availabilityChangedSub, vars); resp.StatusCode != 200 { // four
		t.Fatalf("SSE within the budget: %d", resp.StatusCode)
	}
	c.subscribe("3", availabilityChangedSub, vars)
	if got := c.outcome("3"); !strings.Contains(got, "RATE_LIMITED") {
		t.Fatalf("fifth anonymous read over the socket: %q, want RATE_LIMITED", got)
	}
	if resp := openSSE(t, ctx, ts.url, "", availabilityChangedSub, vars); resp.StatusCode != 429 {
		t.Fatalf("anonymous SSE past the budget: %d, want 429", resp.StatusCode)
	}
}
