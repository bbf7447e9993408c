package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"inventory/testkit"
)

// TestAdminWebhooksPanelInBrowser drives the Webhooks panel of /admin in
// headless Chromium: it lists every endpoint with its state and lag, a
// failing endpoint stands out and its log marks the failed attempts, the
// good one's log pages with More, Pause / Resume / Send test act on the
// server (checked in SQL and at the receiver), attacker-influenced text (a
// URL, a pause reason) stays text, and the page requests nothing from other
// hosts. A screenshot goes to testdata/artifacts/.
func TestAdminWebhooksPanelInBrowser(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	good := testkit.NewWebhookReceiver(t)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(bad.Close)

	create := func(u string, topics ...string) string {
		t.Helper()
		var p webhookPayloadJSON
		ts.mustData(ts.gql(ts.admin, `mutation($in: CreateWebhookInput!) { createWebhook(input: $in) { webhook { id } userErrors { code } } }`,
			map[string]any{"in": map[string]any{"url": u, "topics": topics}}), "createWebhook", &p)
		if p.Webhook == nil {
			t.Fatalf("create %s: %+v", u, p)
		}
		return p.Webhook.ID
	}
	goodID := create(good.URL, "STOCK_CHANGED")
	badID := create(bad.URL+"/fails", "STOCK_CHANGED")
	// A URL with markup in it is refused (only URL characters); markup in a
	// pause reason must reach the page as text. The endpoint has no events to
	// send (no pre-orders) and is paused anyway.
	var refused webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation { createWebhook(input: {url: "http://127.0.0.1:9/<b>x</b>", topics: [STOCK_CHANGED]}) { webhook { id } userErrors { code } } }`, nil),
		"createWebhook", &refused)
	if refused.Webhook != nil || len(refused.UserErrors) != 1 || refused.UserErrors[0].Code != "INVALID_INPUT" {
		t.Fatalf("a URL with markup: %+v", refused)
	}
	evilURL := "http://127.0.0.1:9/%3Cb%3Ex%3C/b%3E?'onerror'=(1)"
	evilReason := `<b>reason</b><img src=x onerror="window.__xss=1">`
	evilID := create(evilURL, "PREORDER_ALLOCATED")
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!, $r: String) { pauseWebhook(id: $id, reason: $r) { webhook { id } userErrors { code } } }`,
		map[string]any{"id": evilID, "r": evilReason}), "pauseWebhook", &p)

	// More than a page of deliveries to the good receiver; the bad one fails
	// the first event and is retried with backoff.
	ts.seed("HP", 7)
	for i := range 55 {
		var out map[string]any
		ts.mustData(ts.gql(ts.admin, `mutation($r: String!) { receiveStock(input: {sku: "HP", location: "AMS", quantity: 1, reference: $r}) { userErrors { code } } }`,
			map[string]any{"r": "PO-" + strconv.Itoa(i)}), "receiveStock", &out)
	}
	sqlInt := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := ts.db.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deliveries := `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1::uuid AND status_code = $2`
	waitUntil(t, 30*time.Second, "56 deliveries answered 204", func() bool { return sqlInt(deliveries, goodID, 204) >= 56 })
	waitUntil(t, 30*time.Second, "a delivery answered 500", func() bool { return sqlInt(deliveries, badID, 500) >= 1 })
	paused := func(id string) bool {
		return sqlInt(`SELECT (paused_at IS NOT NULL)::int FROM webhook_endpoints WHERE id = $1::uuid`, id) == 1
	}

	b := newBrowserTab(t, 90*time.Second)
	u, _ := url.Parse(ts.url)
	if err := chromedp.Do(b.ctx, chromedp.Navigate(ts.url+"/admin"), chromedp.WaitVisible(`#signin`),
		chromedp.SendKeys(`#key`, ts.admin), chromedp.Click(`#signin button`), chromedp.WaitVisible(`#webhooks`)); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	row := func(id string) string { return `#wh-rows tr[data-id="` + id + `"]` }
	text := func(sel string) string { return `(document.querySelector('` + sel + `') || {}).textContent` }
	cell := func(id, c string) string { return text(row(id) + ` td.` + c) }
	b.waitJS(t, "every endpoint listed", `document.querySelectorAll('#wh-rows tr').length === 3 && `+
		cell(goodID, "url")+` === `+strconv.Quote(good.URL)+` && `+cell(badID, "url")+` === `+strconv.Quote(bad.URL+"/fails"), 10*time.Second)
	b.waitJS(t, "good endpoint active, caught up", cell(goodID, "state")+` === "active" && `+cell(goodID, "lag")+` === "0" && `+
		cell(goodID, "filters")+`.includes("SKUs: all") && `+cell(goodID, "topics")+` === "STOCK_CHANGED"`, 15*time.Second)
	b.waitJS(t, "bad endpoint failing, behind", `document.querySelector('`+row(badID)+`').classList.contains("failing") && `+
		`Number(`+cell(badID, "failures")+`) >= 1 && Number(`+cell(badID, "lag")+`) >= 55 && `+
		`document.getElementById("webhooks").classList.contains("alert")`, 15*time.Second)

	// Server text stays text.
	b.waitJS(t, "markup shown as text", cell(evilID, "url")+` === `+strconv.Quote(evilURL)+` && `+
		cell(evilID, "state")+`.includes(`+strconv.Quote(evilReason)+`) && `+
		`document.querySelector('`+row(evilID)+`').classList.contains("paused")`, 5*time.Second)
	b.waitJS(t, "no element made from server text", `document.querySelectorAll('#webhooks b, #webhooks img').length === 0 && window.__xss === undefined`, time.Second)

	// The good log: newest first, 50 then More for the rest.
	total := sqlInt(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1::uuid`, goodID)
	logRows := `document.querySelectorAll('#wh-log-rows tr')`
	if err := chromedp.Do(b.ctx, chromedp.Click(row(goodID)+` button.log`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "first page of the good log", logRows+`.length === 50 && !document.getElementById("wh-more").hidden && `+
		`[...`+logRows+`].every((r) => !r.classList.contains("failed") && r.querySelector(".status").textContent === "204" && r.querySelector(".topic").textContent === "stock.changed")`,
		5*time.Second)
	if err := chromedp.Do(b.ctx, chromedp.Click(`#wh-more`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "second page", logRows+`.length === `+strconv.Itoa(total)+` && document.getElementById("wh-more").hidden && `+
		`[...`+logRows+`].every((r, i, all) => i === 0 || BigInt(all[i-1].dataset.id) > BigInt(r.dataset.id))`, 5*time.Second)

	// The bad log marks its failed attempts.
	if err := chromedp.Do(b.ctx, chromedp.Click(row(badID)+` button.log`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "failed attempt marked", logRows+`.length >= 1 && [...`+logRows+`].every((r) => r.classList.contains("failed") && `+
		`r.querySelector(".status").textContent === "500" && r.querySelector(".error").textContent.includes("500"))`, 5*time.Second)

	// Pause with a reason, then resume.
	if err := chromedp.Do(b.ctx, chromedp.SendKeys(row(goodID)+` input.reason`, "receiver <b>deploy</b>"), chromedp.Click(row(goodID)+` button.pause`)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "paused in SQL", func() bool { return paused(goodID) })
	b.waitJS(t, "shown paused", `document.querySelector('`+row(goodID)+`').classList.contains("paused") && `+
		`document.querySelector('`+row(goodID)+` .pause-reason').textContent === "receiver <b>deploy</b>" && `+
		text(row(goodID)+` .result`)+` === "paused" && document.querySelector('`+row(goodID)+` button.pause').hidden`, 5*time.Second)
	if err := chromedp.Do(b.ctx, chromedp.Click(row(goodID)+` button.resume`)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "resumed in SQL", func() bool { return !paused(goodID) })
	b.waitJS(t, "shown active", cell(goodID, "state")+` === "active" && !document.querySelector('`+row(goodID)+`').classList.contains("paused") && `+
		text(row(goodID)+` .result`)+` === "resumed"`, 5*time.Second)

	// Send test from the good row with its log open: a webhook.test row on top.
	if err := chromedp.Do(b.ctx, chromedp.Click(row(goodID)+` button.log`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "good log again", logRows+`.length === 50`, 5*time.Second)
	if err := chromedp.Do(b.ctx, chromedp.Click(row(goodID)+` button.test`)); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "webhook.test in the log", `(() => { const r = document.querySelector('#wh-log-rows tr'); `+
		`return r && r.querySelector(".topic").textContent === "webhook.test" && r.querySelector(".status").textContent === "204" && !r.classList.contains("failed"); })() && `+
		text(row(goodID)+` .result`)+`.startsWith("test delivered: 204")`, 5*time.Second)
	waitUntil(t, 5*time.Second, "the receiver got webhook.test", func() bool {
		for _, r := range good.Requests() {
			if r.Type == "webhook.test" {
				return true
			}
		}
		return false
	})

	b.waitJS(t, "still no element made from server text", `document.querySelectorAll('#webhooks b, #webhooks img').length === 0 && window.__xss === undefined`, time.Second)
	b.screenshot(t, "admin-webhooks.png")
	if foreign, total := b.foreign(u.Host); len(foreign) != 0 || total == 0 {
		t.Fatalf("requests to other hosts: %v (of %d)", foreign, total)
	}
}
