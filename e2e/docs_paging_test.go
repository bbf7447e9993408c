package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDocsJSRelayPaging runs the paging guide's urql snippet (the ```js test
// block on balancesConnection, with the stock relayPagination helper) under
// Node against a test server with the demo catalog and more balances than
// fit a page of 100: it must print every balance exactly once, in the
// connection's order, and their count.
func TestDocsJSRelayPaging(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for this test: install Node.js (make test runs npm ci in testdata/node-client)")
	}
	var snippets []docBlock
	for _, file := range docFiles(t) {
		for _, b := range fencedBlocks(t, file) {
			if b.is("js") && strings.Contains(b.text, "balancesConnection") {
				snippets = append(snippets, b)
			}
		}
	}
	if len(snippets) != 1 {
		t.Fatalf("want exactly one ```js test block on balancesConnection in docs/, found %d", len(snippets))
	}
	snippet := snippets[0]
	for _, must := range []string{"relayPagination()", "http://localhost:8080/graphql", "process.env.ADMIN_TOKEN"} {
		if !strings.Contains(snippet.text, must) {
			t.Fatalf("%s:%d: the example should use %s", snippet.file, snippet.line, must)
		}
	}
	ts := setup(t)
	ts.cli("demo")
	// 250 more balances: three pages of 100.
	ts.exec(`INSERT INTO skus (code, name, kind) SELECT format('PG-%s', lpad(i::text, 3, '0')), 'Thing', 'quantity' FROM generate_series(0, 249) i`)
	ts.exec(`INSERT INTO balances (sku_id, location_id, on_hand) SELECT s.id, (SELECT id FROM locations WHERE code = 'AMS'), 2 FROM skus s WHERE s.code LIKE 'PG-%'`)
	var want []string
	rows, err := ts.db.Query(t.Context(), `SELECT s.code || ' ' || l.code FROM balances b JOIN skus s ON s.id = b.sku_id
		JOIN locations l ON l.id = b.location_id ORDER BY s.code, l.code`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
	}
	if rows.Err() != nil || len(want) <= 250 {
		t.Fatalf("%d balances (%v); want the demo's and 250 more", len(want), rows.Err())
	}

	// Written inside testdata/node-client so that its node_modules resolve.
	f, err := os.CreateTemp("testdata/node-client", "docs-snippet-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	f.WriteString(strings.ReplaceAll(snippet.text, "http://localhost:8080/graphql", ts.url+"/graphql"))
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Base(f.Name()))
	cmd.Dir = "testdata/node-client"
	cmd.Env = append(os.Environ(), "ADMIN_TOKEN="+ts.admin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s:%d: the example failed (%v):\n%s", snippet.file, snippet.line, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var got []string
	for _, l := range lines[:len(lines)-1] {
		sku, rest, _ := strings.Cut(l, " ")
		loc, _, _ := strings.Cut(rest, " ")
		got = append(got, sku+" "+loc)
	}
	if !slices.Equal(got, want) || lines[len(lines)-1] != fmt.Sprintf("%d balances", len(want)) {
		t.Fatalf("%s:%d: the example printed %d balances (last line %q); want every one of the %d once, in order:\n%s",
			snippet.file, snippet.line, len(got), lines[len(lines)-1], len(want), out)
	}
	t.Logf("%s:%d: the example paged %d balances", snippet.file, snippet.line, len(want))
}
