package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browserTab is a headless Chromium tab that records every URL the page
// requests (HTTP and WebSocket), so a test can prove the page never leaves
// its server.
type browserTab struct {
	ctx  context.Context
	mu   sync.Mutex
	urls []string
}

// newBrowserTab starts Chromium the way TestGraphiQLRendersOffline does, for
// at most timeout.
func newBrowserTab(t *testing.T, timeout time.Duration) *browserTab {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required for this test (make test installs Debian's chromium package)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(t.TempDir()))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	b := &browserTab{}
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithListener(func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		case *network.EventWebSocketCreated:
			b.urls = append(b.urls, e.URL)
		}
	}))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	b.ctx = ctx
	return b
}

// foreign returns the recorded URLs whose host is not host.
func (b *browserTab) foreign(host string) (foreign []string, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.urls {
		p, err := url.Parse(u)
		if err != nil || p.Host != host {
			foreign = append(foreign, u)
		}
	}
	return foreign, len(b.urls)
}

// cookies returns the browser's cookies for u.
func (b *browserTab) cookies(t *testing.T, u string) []*network.Cookie {
	t.Helper()
	c, err := chromedp.Run(b.ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
		return res.Cookies, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// screenshot writes the page as PNG to testdata/artifacts/name (ignored by
// git).
func (b *browserTab) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "artifacts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitJS polls a JavaScript expression until it is truthy.
func (b *browserTab) waitJS(t *testing.T, what, expr string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[any](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// cellJS reads a cell of the dashboard row for sku at location.
func cellJS(sku, location, field string) string {
	return `(document.querySelector('.row[data-key="` + sku + `@` + location + `"] .` + field + `') || {}).textContent`
}
