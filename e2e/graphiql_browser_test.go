package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"inventory/graphiql"
)

// TestGraphiQLRendersOffline loads / in headless Chromium on a machine with no
// internet access: GraphiQL must come up from the embedded assets (whose
// integrity hashes must match) and run a query against /graphql.
func TestGraphiQLRendersOffline(t *testing.T) {
	t.Parallel()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required for this test (make test installs Debian's chromium package)")
	}
	ts := setup(t)
	ts.seed("HP", 7)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 30*time.Second)
	defer cancelTimeout()

	if err := chromedp.Do(ctx, chromedp.Navigate(ts.url+"/"), chromedp.WaitVisible(`.graphiql-container`)); err != nil {
		t.Fatalf("GraphiQL did not render: %v", err)
	}
	// Run a query from the page itself, the way GraphiQL's fetcher does.
	result, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch('/graphql', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({query: '{ availability(skus: ["HP"]) { available } }'})}).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("query from the page: %v", err)
	}
	if !strings.Contains(result, `"available":7`) {
		t.Fatalf("query from the page: %s", result)
	}
}

// TestGraphiQLStarterDocument opens GraphiQL in a fresh browser profile on a
// database with the demo catalog (`inventory demo`): the query editor holds
// graphiql.Starter, not GraphiQL's welcome text, and is the wider pane;
// running it with the page's own run button answers the availability of
// every demo SKU, without errors, as the database has it; the page's icon
// decodes and none of its requests fails. A screenshot goes
// to testdata/artifacts/graphiql.png.
func TestGraphiQLStarterDocument(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.cli("demo")
	b := newBrowserTab(t, 60*time.Second)
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(ts.url+"/"),
		chromedp.WaitVisible(`.graphiql-query-editor .CodeMirror`)); err != nil {
		t.Fatalf("GraphiQL did not render: %v", err)
	}
	editor := func(pane string) string {
		return `document.querySelector('` + pane + ` .CodeMirror').CodeMirror.getValue()`
	}
	b.waitJS(t, "a document in the editor", editor(".graphiql-query-editor")+` !== ""`, 5*time.Second)
	doc, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](editor(".graphiql-query-editor")))
	if err != nil {
		t.Fatal(err)
	}
	if doc != graphiql.Starter {
		t.Fatalf("the editor opened on\n%s", doc)
	}
	widths, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]float64](`['.graphiql-editors', '.graphiql-response'].map((s) => document.querySelector(s).getBoundingClientRect().width)`))
	if err != nil {
		t.Fatal(err)
	}
	if widths[0] < 1.5*widths[1] {
		t.Fatalf("editor pane %.0f px, response pane %.0f px: the editor should be the wider", widths[0], widths[1])
	}
	// At 1400 px, no line of the starter hides past the editor's right edge.
	overflow, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]float64](`((s) => [s.scrollWidth, s.clientWidth])(document.querySelector('.graphiql-query-editor .CodeMirror-scroll'))`))
	if err != nil {
		t.Fatal(err)
	}
	if overflow[0] > overflow[1] {
		t.Fatalf("the query editor scrolls sideways: %.0f px of content in %.0f px", overflow[0], overflow[1])
	}

	if err := chromedp.Do(b.ctx, chromedp.Click(`.graphiql-execute-button`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "an answer in the response pane", editor(".graphiql-response")+`.includes('"data"')`, 10*time.Second)
	answer, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](editor(".graphiql-response")))
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		Data struct {
			Availability []*struct {
				SKU       string `json:"sku"`
				Available int    `json:"available"`
				OnHand    int    `json:"onHand"`
				Locations []struct {
					Location  string `json:"location"`
					Available int    `json:"available"`
				} `json:"locations"`
			} `json:"availability"`
		} `json:"data"`
		Errors []any `json:"errors"`
	}
	if err := json.Unmarshal([]byte(answer), &shown); err != nil || len(shown.Errors) > 0 {
		t.Fatalf("the response pane shows %s (%v)", answer, err)
	}
	rows, err := ts.db.Query(context.Background(), `SELECT s.code, coalesce(sum(b.on_hand), 0)::int FROM skus s LEFT JOIN balances b ON b.sku_id = s.id GROUP BY s.code ORDER BY s.code`)
	if err != nil {
		t.Fatal(err)
	}
	onHand, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		SKU    string
		OnHand int
	}])
	if err != nil {
		t.Fatal(err)
	}
	if len(onHand) != 5 || len(shown.Data.Availability) != len(onHand) {
		t.Fatalf("the demo catalog has %d SKUs (%v); the starter shows %s", len(onHand), onHand, answer)
	}
	got := map[string]int{}
	for _, a := range shown.Data.Availability {
		if a == nil {
			t.Fatalf("a starter SKU is not in the demo catalog: %s", answer)
		}
		got[a.SKU] = a.OnHand
	}
	for _, s := range onHand {
		if got[s.SKU] != s.OnHand {
			t.Fatalf("%s: the page shows on hand %d, the database has %d (%s)", s.SKU, got[s.SKU], s.OnHand, answer)
		}
	}
	b.checkIcon(t, "GraphiQL")
	if failed := b.errorResponses(); len(failed) > 0 {
		t.Fatalf("failed requests: %v", failed)
	}
	b.screenshot(t, "graphiql.png")
}
