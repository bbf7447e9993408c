package e2e

import (
	"context"
	"fmt"
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
	ctx    context.Context
	mu     sync.Mutex
	urls   []string
	failed []string // "status URL" of every response >= 400
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
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				b.failed = append(b.failed, fmt.Sprint(e.Response.Status, " ", e.Response.URL))
			}
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

// errorResponses returns the responses >= 400 the page got so far.
func (b *browserTab) errorResponses() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.failed...)
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
// git) and logs where, for a human to look at.
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
	if abs, err := filepath.Abs(filepath.Join(dir, name)); err == nil {
		t.Logf("screenshot: %s", abs)
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

// layoutJS lists what a reader would see as a broken layout: any two pieces
// of visible text (each line box of each text node, and every input, button
// and select) whose boxes intersect, after cutting each box to what its
// scrolling or clipping ancestors show; chart labels (SVG text) must also
// keep 4 px apart, since labels that touch read as one ("1m-5m5m-15m").
// And the page must not be wider than the window (a phone scrolls down, not
// sideways; wide tables scroll in boxes of their own).
const layoutJS = `(() => {
  const clip = (el, b) => {
    let r = {l: b.left, t: b.top, r: b.right, b: b.bottom};
    for (let a = el.parentElement; a; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.overflowX === "visible" && cs.overflowY === "visible") continue;
      const c = a.getBoundingClientRect();
      r = {l: Math.max(r.l, c.left), t: Math.max(r.t, c.top), r: Math.min(r.r, c.right), b: Math.min(r.b, c.bottom)};
    }
    return r.r - r.l > 0.5 && r.b - r.t > 0.5 ? r : null;
  };
  const shown = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden" && !el.closest("title, script, style, [hidden]");
  const boxes = [];
  const add = (el, text, b, id) => {
    const r = clip(el, b);
    if (r) boxes.push(Object.assign(r, {id, text: text.trim().slice(0, 30), svg: !!el.closest("svg")}));
  };
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let id = 0;
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !shown(el) || el.closest("button, select")) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    id++;
    const rects = el instanceof SVGElement ? [el.getBoundingClientRect()] : range.getClientRects();
    for (const b of rects) add(el, n.textContent, b, id);
  }
  for (const el of document.querySelectorAll("input, button, select, textarea")) {
    if (shown(el)) add(el, el.textContent || el.placeholder || el.name || el.tagName, el.getBoundingClientRect(), ++id);
  }
  const out = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    const m = a.svg && b.svg ? 2 : -0.5; // chart labels: 4 px apart; the rest may touch
    if (a.id === b.id || a.r + m <= b.l - m || b.r + m <= a.l - m || a.b + m <= b.t - m || b.b + m <= a.t - m) continue;
    out.push(JSON.stringify(a.text) + " overlaps " + JSON.stringify(b.text) + " at " + Math.round(a.l) + "," + Math.round(a.t));
  }
  const de = document.documentElement;
  if (de.scrollWidth > de.clientWidth + 1) out.push("the page is " + de.scrollWidth + " px wide in a " + de.clientWidth + " px window");
  return out;
})()`

// layoutProblems runs layoutJS on the page as it is now.
func (b *browserTab) layoutProblems(t *testing.T) []string {
	t.Helper()
	out, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](layoutJS))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkIcon fails the test unless the page links an icon that the browser
// fetches and decodes.
func (b *browserTab) checkIcon(t *testing.T, page string) {
	t.Helper()
	w, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`(async () => { const i = new Image();
	  i.src = document.querySelector('link[rel="icon"]').href; await i.decode(); return i.naturalWidth; })()`, chromedp.EvalAwaitPromise))
	if err != nil || w < 16 {
		t.Fatalf("%s: the icon does not decode: %d %v", page, w, err)
	}
}
