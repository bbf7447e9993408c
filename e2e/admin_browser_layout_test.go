package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// layoutSizes are the windows the dashboard is checked at: a laptop and a
// phone (iPhone 12-15 class, in CSS pixels).
var layoutSizes = []struct {
	name          string
	width, height int64
	mobile        bool
}{
	{"1400", 1400, 900, false},
	{"390", 390, 844, true},
}

// setWindow resizes the tab's window (as a phone, with mobile set) and waits
// for the page to have redrawn at the new size.
func (b *browserTab) setWindow(t *testing.T, width, height int64, mobile bool) {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(width, height, opts...)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, fmt.Sprint("a ", width, " px window"), fmt.Sprint(`document.documentElement.clientWidth === `, width), 5*time.Second)
	// The resize event (the chart redraws on it) fires in the next frame.
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(() => ok(true))))`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatal(err)
	}
}

// TestAdminDashboardLayout checks the sign-in form and the dashboard (demo
// catalog, a few holds, no webhook endpoint yet) at 1400x900 and at phone
// width: no two labels overlap and the page is no wider than the window
// (layoutJS); the hold-age chart's labels keep apart; the sweeper card says
// what its number counts and when; the empty Webhooks panel says there are
// no endpoints and how to add one, and shows the table once there is one;
// the sign-in hint's command reads as written; both pages link an icon the
// browser can decode, and no request of either page fails. Screenshots of
// each page at each size go to testdata/artifacts/ (the test logs where).
func TestAdminDashboardLayout(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	ts.cli("demo")
	for i, sku := range []string{"HEADPHONES-BLK", "USB-C-CABLE", "CONSOLE-X"} {
		if _, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars(fmt.Sprint("cart-", i), "k", sku, 1))); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowserTab(t, 90*time.Second)
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector('`+sel+`') || {}).innerText || ""`))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(s), " ")
	}
	checkLayout := func(page, size string) {
		t.Helper()
		if problems := b.layoutProblems(t); len(problems) > 0 {
			b.screenshot(t, "admin-layout-"+page+"-"+size+"-FAILED.png")
			t.Errorf("%s at %s px: %d layout problems:\n%s", page, size, len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"))
		}
		b.screenshot(t, "admin-layout-"+page+"-"+size+".png")
	}

	// The sign-in form.
	if err := chromedp.Do(b.ctx, chromedp.Navigate(ts.url+"/admin"), chromedp.WaitVisible(`#signin`)); err != nil {
		t.Fatalf("sign-in form: %v", err)
	}
	b.checkIcon(t, "sign-in form")
	if hint := text(".hint"); !strings.Contains(hint, "(make run prints one)") {
		t.Fatalf("sign-in hint: %q", hint)
	}
	// "make run" in the hint: the gap between the words as drawn is no wider
	// than a space of the sentence around it (a monospace space is about
	// twice as wide, and reads as "make  run").
	gaps, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]float64](`(() => {
	  const width = (node, at) => { const r = document.createRange(); r.setStart(node, at); r.setEnd(node, at + 1); return r.getBoundingClientRect().width; };
	  const code = document.querySelector('.hint code').firstChild, prose = document.querySelector('.hint').firstChild;
	  return [width(code, code.textContent.indexOf(' ')), width(prose, prose.textContent.indexOf(' '))];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if gaps[0] > 1.3*gaps[1] {
		t.Errorf(`the space in "make run" is %.1f px, a space of the sentence %.1f px: it reads as two`, gaps[0], gaps[1])
	}
	for _, s := range layoutSizes {
		b.setWindow(t, s.width, s.height, s.mobile)
		checkLayout("signin", s.name)
	}

	// The dashboard.
	b.setWindow(t, 1400, 900, false)
	if err := chromedp.Do(b.ctx, chromedp.SetValue(`#key`, ts.admin), chromedp.Click(`#signin button`),
		chromedp.WaitVisible(`.row[data-key="USB-C-CABLE@AMS"]`)); err != nil {
		t.Fatalf("dashboard after sign-in: %v", err)
	}
	b.checkIcon(t, "dashboard")
	b.waitJS(t, "holds by age drawn", `document.getElementById('m-held').textContent === "3" && document.querySelectorAll('#age-chart text').length === 10`, 10*time.Second)
	b.waitJS(t, "the sweeper's first pass shown", `!document.getElementById('m-sweep-at').textContent.includes('no pass yet')`, 30*time.Second) // it runs at start, once River has elected a leader
	if sweep := text("#c-sweep"); !regexp.MustCompile(`(?i)^Sweeper, last pass \d+ released at \d.*, \d+ (s|min|h) ago`).MatchString(sweep) {
		t.Errorf("the sweeper card reads %q: say what the number counts, and when the pass was", sweep)
	}
	b.waitJS(t, "the webhook list read", `document.getElementById('wh-summary').textContent !== "loading"`, 10*time.Second)
	if empty := text("#wh-empty"); !strings.Contains(empty, "No endpoints") || !strings.Contains(empty, "createWebhook") {
		t.Errorf("the empty Webhooks panel says %q: say there are none and how to add one", empty)
	}
	if shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.getElementById('wh-table').getClientRects().length > 0`)); shown {
		t.Errorf("the empty Webhooks panel shows a table of headers only")
	}
	for _, s := range layoutSizes {
		b.setWindow(t, s.width, s.height, s.mobile)
		checkLayout("dashboard", s.name)
	}

	// A chart narrower than these windows make (a smaller phone, a larger
	// font): its labels go on two alternating lines, not into each other.
	narrow, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.getElementById('age-chart').style.width = '150px'; drawAges(window.__admin.ages);
	  new Set([...document.querySelectorAll('#age-chart text')].filter((l) => !/^\d+$/.test(l.textContent)).map((l) => l.getAttribute('y'))).size`))
	if err != nil {
		t.Fatal(err)
	}
	if problems := b.layoutProblems(t); len(problems) > 0 || narrow != 2 {
		b.screenshot(t, "admin-layout-narrow-chart-FAILED.png")
		t.Errorf("a 150 px chart: labels on %d lines, %v", narrow, problems)
	}
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.getElementById('age-chart').style.width = ''; drawAges(window.__admin.ages); 1`)); err != nil {
		t.Fatal(err)
	}

	// An endpoint appears: the table replaces the message.
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation { createWebhook(input: {url: "http://127.0.0.1:9/hook", topics: [STOCK_CHANGED]}) { webhook { id } userErrors { code } } }`, nil),
		"createWebhook", &p)
	b.waitJS(t, "the table instead of the message", `document.querySelectorAll('#wh-rows tr').length === 1 && document.getElementById('wh-table').getClientRects().length > 0 && `+
		`document.getElementById('wh-empty').getClientRects().length === 0`, 10*time.Second)
	checkLayout("dashboard-webhook", "390")

	if failed := b.errorResponses(); len(failed) > 0 {
		t.Fatalf("failed requests: %v", failed)
	}
}
