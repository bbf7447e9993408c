package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestAdminDashboardInBrowser drives /admin in headless Chromium: a bad key
// is refused without a cookie; the admin key signs in; the seeded balances
// are listed; a reservation made over the API shows in its row without a
// reload (stockChanged over the cookie-authenticated WebSocket); stock
// received from the page's quick action lands; and the page never requests
// anything from another host. A screenshot goes to testdata/artifacts/.
func TestAdminDashboardInBrowser(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 7)
	ts.seed("USB", 3)
	b := newBrowserTab(t, 60*time.Second)
	u, _ := url.Parse(ts.url)

	if err := chromedp.Do(b.ctx, chromedp.Navigate(ts.url+"/admin"), chromedp.WaitVisible(`#signin`)); err != nil {
		t.Fatalf("sign-in form: %v", err)
	}
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(`#key`, "inv_wrong"), chromedp.Click(`#signin button`), chromedp.WaitVisible(`#error`)); err != nil {
		t.Fatalf("bad key: %v", err)
	}
	if msg, _ := chromedp.Run(b.ctx, chromedp.Text(`#error`)); !strings.Contains(msg, "not a live admin key") {
		t.Fatalf("bad key message: %q", msg)
	}
	if c := b.cookies(t, ts.url); len(c) != 0 {
		t.Fatalf("a bad key set cookies: %+v", c)
	}

	if err := chromedp.Do(b.ctx, chromedp.SetValue(`#key`, ts.admin), chromedp.Click(`#signin button`),
		chromedp.WaitVisible(`.row[data-key="HP@AMS"]`)); err != nil {
		t.Fatalf("dashboard after sign-in: %v", err)
	}
	b.waitJS(t, "seeded rows", cellJS("USB", "AMS", "onHand")+` === "3" && `+cellJS("HP", "AMS", "available")+` === "7"`, 5*time.Second)
	b.waitJS(t, "live subscription", `window.__admin.live === true`, 5*time.Second)

	// A reservation made elsewhere shows up live.
	if _, err := gqlTo(ts.url, ts.service, reserveMutation, reserveVars("cart-1", "k", "HP", 2)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "reserved count from stockChanged", cellJS("HP", "AMS", "reserved")+` === "2" && `+cellJS("HP", "AMS", "available")+` === "5"`, 5*time.Second)

	// Receive stock from the row's quick actions.
	if err := chromedp.Do(b.ctx, chromedp.Click(`.row[data-key="HP@AMS"] button.act`), chromedp.WaitVisible(`#actions`),
		chromedp.SetValue(`#a-receive input[name=quantity]`, "5"), chromedp.SetValue(`#a-receive input[name=reference]`, "PO-7"),
		chromedp.Click(`#a-receive button`)); err != nil {
		t.Fatalf("receive from the page: %v", err)
	}
	b.waitJS(t, "on hand after receiving", cellJS("HP", "AMS", "onHand")+` === "12"`, 5*time.Second)
	if n := ts.count("SELECT b.on_hand FROM balances b JOIN skus s ON s.id = b.sku_id WHERE s.code = 'HP'"); n != 12 {
		t.Fatalf("on hand in the database: %d", n)
	}
	// A stale expectedOnHand is refused inline, and changes nothing.
	if err := chromedp.Do(b.ctx, chromedp.SetValue(`#a-adjust input[name=delta]`, "-1"), chromedp.SetValue(`#a-adjust input[name=reason]`, "damaged"),
		chromedp.SetValue(`#a-adjust input[name=reference]`, "R-1"), chromedp.SetValue(`#a-adjust input[name=expectedOnHand]`, "99"),
		chromedp.Click(`#a-adjust button`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "STALE_QUANTITY shown", `document.querySelector('#a-adjust .result').textContent.includes("STALE_QUANTITY")`, 5*time.Second)
	b.waitJS(t, "health numbers", `document.getElementById('m-failure').textContent.includes('%') && document.getElementById('m-held').textContent === "1"`, 10*time.Second)

	// The waitlist panel: the longest lines first, each with the entries
	// waiting, the units they want and how long the front has waited, as
	// the database has them; the read behind it is the admin's.
	ts.soldOutHTTP("DROP", 2)
	ts.soldOutHTTP("GPU", 1)
	for i, q := range []int{1, 2, 1} {
		mustJoinAs(t, ts.url, ts.service, joinVars(fmt.Sprint("wl-", i), "k", "DROP", q))
	}
	mustJoinAs(t, ts.url, ts.service, joinVars("wl-9", "k", "GPU", 1))
	b.waitJS(t, "waitlist panel", `/^DROP 3 4 \d+ s\|GPU 1 1 \d+ s$/.test([...document.querySelectorAll('#wl-rows tr')].map((r) => [...r.cells].map((c) => c.textContent).join(' ')).join('|'))`, 10*time.Second)
	for sku, want := range map[string]int{"DROP": 3, "GPU": 1} {
		if n := ts.count(`SELECT count(*) FROM waitlist_entries w JOIN skus s ON s.id = w.sku_id WHERE w.status = 'waiting' AND s.code = '` + sku + `'`); n != want {
			t.Fatalf("%s: %d waiting in the database, the panel showed %d", sku, n, want)
		}
	}
	for who, want := range map[string]string{ts.service: "FORBIDDEN", "": "UNAUTHENTICATED", ts.admin: ""} {
		if r := ts.gql(who, `{ waitlistLines { sku waiting } }`, nil); r.errorCode() != want {
			t.Fatalf("waitlistLines: got %q want %q (%+v)", r.errorCode(), want, r.Errors)
		}
	}
	if r := ts.gql(ts.admin, `{ waitlistLines(first: 101) { sku } }`, nil); r.errorCode() != "BAD_REQUEST" {
		t.Fatalf("waitlistLines(first: 101): %q %+v", r.errorCode(), r.Errors)
	}

	b.screenshot(t, "admin-dashboard.png")
	if foreign, total := b.foreign(u.Host); len(foreign) != 0 || total == 0 {
		t.Fatalf("requests to other hosts: %v (of %d)", foreign, total)
	}
}
