package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestAdminDashboardResumesAfterRestart: the server under an open dashboard
// stops while another instance changes stock, then comes back on the same
// address; the page reconnects by itself, resumes stockChanged from its
// last seq and shows every change made while it was away, without a reload.
func TestAdminDashboardResumesAfterRestart(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	ts.seed("HP", 7)
	b := newBrowserTab(t, 60*time.Second)
	u, _ := url.Parse(ts.url)

	if err := chromedp.Do(b.ctx, chromedp.Navigate(ts.url+"/admin"), chromedp.WaitVisible(`#signin`),
		chromedp.SendKeys(`#key`, ts.admin), chromedp.Click(`#signin button`), chromedp.WaitVisible(`.row[data-key="HP@AMS"]`)); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	b.waitJS(t, "live", `window.__admin.live === true`, 5*time.Second)
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`window.__notReloaded = 1`)); err != nil {
		t.Fatal(err)
	}

	other, _ := ts.startInstance()
	if err := ts.shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	b.waitJS(t, "page notices the drop", `window.__admin.live === false`, 10*time.Second)
	if _, err := gqlTo(other, ts.service, reserveMutation, reserveVars("cart-1", "k", "HP", 3)); err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	r, err := gqlTo(other, ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 4, reference: "PO-2"}) { userErrors { code } } }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts.mustData(r, "receiveStock", &p)

	ts.env["LISTEN_ADDR"] = u.Host
	ts.url, ts.shutdown = ts.startInstance()
	b.waitJS(t, "changes made while away", `window.__admin.live === true && `+cellJS("HP", "AMS", "reserved")+` === "3" && `+cellJS("HP", "AMS", "onHand")+` === "11"`, 20*time.Second)
	b.waitJS(t, "no reload", `window.__notReloaded === 1`, time.Second)
}
