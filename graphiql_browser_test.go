package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
