package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"inventory/webhooks"
)

const webhookFields = `id url topics skus locations lowStockThreshold cursorSeq paused pauseReason consecutiveFailures previousSecretUntil`

type webhookJSON struct {
	ID                  string   `json:"id"`
	URL                 string   `json:"url"`
	Topics              []string `json:"topics"`
	SKUs                []string `json:"skus"`
	Locations           []string `json:"locations"`
	LowStockThreshold   int      `json:"lowStockThreshold"`
	Paused              bool     `json:"paused"`
	PauseReason         *string  `json:"pauseReason"`
	PreviousSecretUntil *string  `json:"previousSecretUntil"`
}

type webhookPayloadJSON struct {
	Webhook    *webhookJSON `json:"webhook"`
	Secret     *string      `json:"secret"`
	UserErrors []struct {
		Code  string   `json:"code"`
		Field []string `json:"field"`
	} `json:"userErrors"`
}

// Admins manage webhooks through GraphQL: create (secret shown once), list,
// update, pause, resume, rotate, delete; URLs are checked; others are refused.
func TestWebhookManagement(t *testing.T) {
	ts := setup(t)
	create := `mutation($in: CreateWebhookInput!) { createWebhook(input: $in) { secret webhook { ` + webhookFields + ` } userErrors { code field } } }`

	if r := ts.gql(ts.service, create, map[string]any{"in": map[string]any{"url": "https://example.com/h", "topics": []string{"STOCK_CHANGED"}}}); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("service key: %+v", r.Errors)
	}
	for _, bad := range []string{"http://127.0.0.1:9/h", "http://localhost/h", "ftp://example.com/", "https://u:p@example.com/", "http://10.0.0.1/", "http://169.254.169.254/"} {
		var p webhookPayloadJSON
		ts.mustData(ts.gql(ts.admin, create, map[string]any{"in": map[string]any{"url": bad, "topics": []string{"STOCK_CHANGED"}}}), "createWebhook", &p)
		if p.Webhook != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "INVALID_INPUT" {
			t.Fatalf("%s: %+v", bad, p)
		}
	}
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, create, map[string]any{"in": map[string]any{"url": "https://example.com/h", "topics": []string{}}}), "createWebhook", &p)
	if len(p.UserErrors) != 1 || p.UserErrors[0].Code != "INVALID_INPUT" {
		t.Fatalf("no topics: %+v", p)
	}

	ts.mustData(ts.gql(ts.admin, create, map[string]any{"in": map[string]any{"url": "https://example.com/h", "topics": []string{"STOCK_CHANGED"}, "skus": []string{"A"}}}), "createWebhook", &p)
	if p.Webhook == nil || p.Secret == nil || len(p.UserErrors) != 0 || p.Webhook.Paused || p.Webhook.URL != "https://example.com/h" ||
		p.Webhook.LowStockThreshold != 5 {
		t.Fatalf("create: %+v", p)
	}
	secret, id := *p.Secret, p.Webhook.ID
	if sig := webhooks.Sign(secret, "x", 1, nil); sig == "" {
		t.Fatal("secret does not sign")
	}

	var list []webhookJSON
	ts.mustData(ts.gql(ts.admin, `{ webhooks { `+webhookFields+` } }`, nil), "webhooks", &list)
	if len(list) != 1 || list[0].ID != id || len(list[0].SKUs) != 1 {
		t.Fatalf("list: %+v", list)
	}
	if r := ts.gql(ts.service, `{ webhooks { id } }`, nil); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("service list: %+v", r.Errors)
	}

	update := `mutation($in: UpdateWebhookInput!) { updateWebhook(input: $in) { webhook { ` + webhookFields + ` } userErrors { code field } } }`
	ts.mustData(ts.gql(ts.admin, update, map[string]any{"in": map[string]any{"id": id, "skus": []string{}, "locations": []string{"AMS"}}}), "updateWebhook", &p)
	if p.Webhook == nil || len(p.Webhook.SKUs) != 0 || len(p.Webhook.Locations) != 1 || p.Webhook.URL != "https://example.com/h" {
		t.Fatalf("update: %+v", p)
	}
	ts.mustData(ts.gql(ts.admin, update, map[string]any{"in": map[string]any{"id": id, "lowStockThreshold": 12,
		"topics": []string{"STOCK_LOW", "STOCK_OUT", "STOCK_BACK_IN", "RESERVATION_EXPIRED", "RESERVATION_CONFIRMED", "PREORDER_ALLOCATED"}}}), "updateWebhook", &p)
	if p.Webhook == nil || p.Webhook.LowStockThreshold != 12 || len(p.Webhook.Topics) != 6 || len(p.Webhook.Locations) != 1 {
		t.Fatalf("update threshold and topics: %+v", p)
	}
	ts.mustData(ts.gql(ts.admin, update, map[string]any{"in": map[string]any{"id": id, "lowStockThreshold": -1}}), "updateWebhook", &p)
	if p.Webhook != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "INVALID_INPUT" {
		t.Fatalf("negative threshold: %+v", p)
	}
	ts.mustData(ts.gql(ts.admin, update, map[string]any{"in": map[string]any{"id": id, "url": "http://192.168.1.1/"}}), "updateWebhook", &p)
	if p.Webhook != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "INVALID_INPUT" {
		t.Fatalf("update to a private URL: %+v", p)
	}

	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!) { pauseWebhook(id: $id, reason: "maintenance") { webhook { `+webhookFields+` } userErrors { code } } }`,
		map[string]any{"id": id}), "pauseWebhook", &p)
	if p.Webhook == nil || !p.Webhook.Paused || p.Webhook.PauseReason == nil || *p.Webhook.PauseReason != "maintenance" {
		t.Fatalf("pause: %+v", p)
	}
	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!) { resumeWebhook(id: $id) { webhook { `+webhookFields+` } userErrors { code } } }`,
		map[string]any{"id": id}), "resumeWebhook", &p)
	if p.Webhook == nil || p.Webhook.Paused || p.Webhook.PauseReason != nil {
		t.Fatalf("resume: %+v", p)
	}

	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret webhook { `+webhookFields+` } userErrors { code } } }`,
		map[string]any{"id": id}), "rotateWebhookSecret", &p)
	if p.Secret == nil || *p.Secret == secret || p.Webhook == nil || p.Webhook.PreviousSecretUntil == nil {
		t.Fatalf("rotate: %+v", p)
	}

	var deliveries []map[string]any
	ts.mustData(ts.gql(ts.admin, `query($id: ID!) { webhookDeliveries(endpointId: $id, first: 10) { id webhookId attempt statusCode latencyMs error } }`,
		map[string]any{"id": id}), "webhookDeliveries", &deliveries)
	if len(deliveries) != 0 {
		t.Fatalf("deliveries: %v", deliveries)
	}
	if r := ts.gql(ts.admin, `query($id: ID!) { webhookDeliveries(endpointId: $id, first: 1000) { id } }`, map[string]any{"id": id}); r.errorCode() != "BAD_REQUEST" {
		t.Fatalf("first 1000: %+v", r.Errors)
	}

	del := `mutation($id: ID!) { deleteWebhook(id: $id) { webhook { id } userErrors { code } } }`
	ts.mustData(ts.gql(ts.admin, del, map[string]any{"id": id}), "deleteWebhook", &p)
	if p.Webhook == nil || p.Webhook.ID != id {
		t.Fatalf("delete: %+v", p)
	}
	for _, missing := range []string{id, "not-a-uuid"} {
		ts.mustData(ts.gql(ts.admin, del, map[string]any{"id": missing}), "deleteWebhook", &p)
		if p.Webhook != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "NOT_FOUND" {
			t.Fatalf("delete %s again: %+v", missing, p)
		}
	}
	if n := ts.count("SELECT count(*) FROM webhook_endpoints"); n != 0 {
		t.Fatalf("%d endpoints left", n)
	}
}

// With INVENTORY_WEBHOOK_ALLOW_PRIVATE=true a loopback URL is accepted.
func TestWebhookAllowPrivate(t *testing.T) {
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation { createWebhook(input: {url: "http://127.0.0.1:9/h", topics: [STOCK_CHANGED]}) { secret webhook { id } userErrors { code } } }`, nil), "createWebhook", &p)
	if p.Webhook == nil || len(p.UserErrors) != 0 {
		t.Fatalf("create: %+v", p)
	}
}

// sendTestWebhook posts one signed webhook.test delivery now and records it
// in the log (attempt 1) without moving the cursor or counting failures.
func TestSendTestWebhook(t *testing.T) {
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	var secret atomic.Value
	secret.Store("")
	var status atomic.Int64
	status.Store(http.StatusNoContent)
	got := make(chan string, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := webhooks.Verify(secret.Load().(string), r.Header.Get(webhooks.HeaderID), r.Header.Get(webhooks.HeaderTimestamp), b,
			r.Header.Get(webhooks.HeaderSignature), time.Now(), 5*time.Minute); err != nil {
			got <- "bad signature: " + err.Error()
		} else {
			got <- r.Header.Get(webhooks.HeaderID) + " " + string(b)
		}
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(recv.Close)

	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED]}) { secret webhook { id } userErrors { code } } }`,
		map[string]any{"u": recv.URL + "/h"}), "createWebhook", &p)
	if p.Webhook == nil || p.Secret == nil {
		t.Fatalf("create: %+v", p)
	}
	secret.Store(*p.Secret)
	id := p.Webhook.ID
	cursor := func() int { return ts.count("SELECT cursor_seq::int FROM webhook_endpoints") }
	before := cursor()

	send := `mutation($id: ID!) { sendTestWebhook(id: $id) { delivery { id webhookId eventSeq topic attempt statusCode latencyMs error at } userErrors { code } } }`
	type deliveryJSON struct {
		ID         string  `json:"id"`
		WebhookID  string  `json:"webhookId"`
		EventSeq   *int64  `json:"eventSeq"`
		Topic      string  `json:"topic"`
		Attempt    int     `json:"attempt"`
		StatusCode *int    `json:"statusCode"`
		LatencyMs  int     `json:"latencyMs"`
		Error      *string `json:"error"`
	}
	var out struct {
		Delivery   *deliveryJSON `json:"delivery"`
		UserErrors []struct {
			Code string `json:"code"`
		} `json:"userErrors"`
	}
	if r := ts.gql(ts.service, send, map[string]any{"id": id}); r.errorCode() != "FORBIDDEN" {
		t.Fatalf("service key: %+v", r.Errors)
	}
	ts.mustData(ts.gql(ts.admin, send, map[string]any{"id": "00000000-0000-0000-0000-000000000000"}), "sendTestWebhook", &out)
	if out.Delivery != nil || len(out.UserErrors) != 1 || out.UserErrors[0].Code != "NOT_FOUND" {
		t.Fatalf("unknown id: %+v", out)
	}

	ts.mustData(ts.gql(ts.admin, send, map[string]any{"id": id}), "sendTestWebhook", &out)
	d := out.Delivery
	if d == nil || len(out.UserErrors) != 0 || d.Topic != "webhook.test" || d.Attempt != 1 || d.EventSeq != nil ||
		d.StatusCode == nil || *d.StatusCode != http.StatusNoContent || d.Error != nil {
		t.Fatalf("test delivery: %+v", out)
	}
	select {
	case m := <-got:
		var body struct {
			Type      string         `json:"type"`
			Timestamp time.Time      `json:"timestamp"`
			Data      map[string]any `json:"data"`
		}
		msgID, raw, _ := strings.Cut(m, " ")
		if err := json.Unmarshal([]byte(raw), &body); err != nil || msgID != d.WebhookID || body.Type != "webhook.test" ||
			body.Timestamp.IsZero() || body.Data == nil || len(body.Data) != 0 {
			t.Fatalf("received %q (%v)", m, err)
		}
	default:
		t.Fatal("nothing received")
	}

	// A failing receiver is recorded, not counted against the endpoint.
	status.Store(http.StatusInternalServerError)
	ts.mustData(ts.gql(ts.admin, send, map[string]any{"id": id}), "sendTestWebhook", &out)
	if d := out.Delivery; d == nil || d.StatusCode == nil || *d.StatusCode != 500 || d.Error == nil || d.Attempt != 1 {
		t.Fatalf("failed test delivery: %+v", out)
	}
	if m := <-got; strings.HasPrefix(m, "bad signature") {
		t.Fatal(m)
	}
	if n := ts.count("SELECT consecutive_failures FROM webhook_endpoints"); n != 0 || cursor() != before {
		t.Fatalf("failures %d, cursor %d (was %d)", n, cursor(), before)
	}
	var log []deliveryJSON
	ts.mustData(ts.gql(ts.admin, `query($id: ID!) { webhookDeliveries(endpointId: $id) { id topic attempt statusCode } }`, map[string]any{"id": id}), "webhookDeliveries", &log)
	if len(log) != 2 || log[0].Topic != "webhook.test" || log[1].Topic != "webhook.test" || *log[0].StatusCode != 500 {
		t.Fatalf("log: %+v", log)
	}
}

// A SKU's own stock.low threshold is set at creation or by
// setSkuLowStockThreshold (null clears it) and read back on the SKU; bad
// values and unknown SKUs are refused and change nothing.
func TestSkuLowStockThreshold(t *testing.T) {
	ts := setup(t)
	type skuPayload struct {
		Sku *struct {
			Code              string `json:"code"`
			LowStockThreshold *int   `json:"lowStockThreshold"`
		} `json:"sku"`
		UserErrors []struct {
			Code  string   `json:"code"`
			Field []string `json:"field"`
		} `json:"userErrors"`
	}
	var p skuPayload
	ts.mustData(ts.gql(ts.admin, `mutation { createSku(input: {code: "BIG", name: "Pallet", kind: QUANTITY, lowStockThreshold: 40}) { sku { code lowStockThreshold } userErrors { code field } } }`, nil), "createSku", &p)
	if p.Sku == nil || p.Sku.LowStockThreshold == nil || *p.Sku.LowStockThreshold != 40 {
		t.Fatalf("create with a threshold: %+v", p)
	}
	ts.mustData(ts.gql(ts.admin, `mutation { createSku(input: {code: "NEG", name: "x", kind: QUANTITY, lowStockThreshold: -1}) { sku { code } userErrors { code field } } }`, nil), "createSku", &p)
	if p.Sku != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "INVALID_INPUT" || strings.Join(p.UserErrors[0].Field, ".") != "input.lowStockThreshold" {
		t.Fatalf("create with -1: %+v", p)
	}

	set := `mutation($s: String!, $t: Int) { setSkuLowStockThreshold(sku: $s, threshold: $t) { sku { code lowStockThreshold } userErrors { code field } } }`
	threshold := func() int { return ts.count("SELECT coalesce(low_stock_threshold, -100) FROM skus WHERE code = 'BIG'") }
	for _, bad := range []struct {
		sku       string
		threshold any
		code      string
	}{{"BIG", -1, "INVALID_INPUT"}, {"BIG", 1_000_000_001, "INVALID_INPUT"}, {"NOPE", 3, "UNKNOWN_SKU"}, {"", 3, "INVALID_INPUT"}} {
		ts.mustData(ts.gql(ts.admin, set, map[string]any{"s": bad.sku, "t": bad.threshold}), "setSkuLowStockThreshold", &p)
		if p.Sku != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != bad.code {
			t.Fatalf("set %v: %+v", bad, p)
		}
		if n := threshold(); n != 40 {
			t.Fatalf("set %v changed the threshold to %d", bad, n)
		}
	}
	ts.mustData(ts.gql(ts.admin, set, map[string]any{"s": "BIG", "t": 0}), "setSkuLowStockThreshold", &p)
	if p.Sku == nil || p.Sku.LowStockThreshold == nil || *p.Sku.LowStockThreshold != 0 || threshold() != 0 {
		t.Fatalf("set 0: %+v", p)
	}
	ts.mustData(ts.gql(ts.admin, set, map[string]any{"s": "BIG", "t": nil}), "setSkuLowStockThreshold", &p)
	if p.Sku == nil || p.Sku.LowStockThreshold != nil || threshold() != -100 {
		t.Fatalf("clear: %+v", p)
	}
	var read struct {
		LowStockThreshold *int `json:"lowStockThreshold"`
	}
	ts.mustData(ts.gql(ts.admin, `{ sku(code: "BIG") { lowStockThreshold } }`, nil), "sku", &read) // admin only (TestLowStockThresholdIsAdminOnly)
	if read.LowStockThreshold != nil {
		t.Fatalf("read after clearing: %+v", read)
	}
}
