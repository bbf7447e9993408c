package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// forbiddenTargets is one URL in every entry of the IANA IPv4 and IPv6
// special-purpose address registries, multicast, the mapped, compatible,
// site-local and zoned IPv6 forms, hosts that parsers read as 127.0.0.1, and
// localhost: none may be saved as a webhook target.
var forbiddenTargets = []string{
	"http://0.0.0.0/", "http://0.1.2.3/", "http://10.0.0.1/", "http://100.64.0.1/", "http://100.127.255.254/",
	"http://127.0.0.1/", "http://127.8.9.10:8080/", "http://169.254.169.254/latest/meta-data", "http://172.16.0.1/",
	"http://192.0.0.1/", "http://192.0.0.9/", "http://192.0.0.170/", "http://192.0.0.192/", "http://192.0.2.1/",
	"http://192.31.196.1/", "http://192.52.193.1/", "http://192.88.99.1/", "http://192.168.1.1/", "http://192.175.48.1/",
	"http://198.18.0.1/", "http://198.19.255.254/", "http://198.51.100.7/", "http://203.0.113.9/", "http://224.0.0.1/",
	"http://239.1.2.3/", "http://240.0.0.1/", "http://255.255.255.255/",
	"http://[::1]/", "http://[::]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:a9fe:a9fe]/", "http://[::127.0.0.1]/",
	"http://[64:ff9b::a9fe:a9fe]/", "http://[64:ff9b::7f00:1]/", "http://[64:ff9b:1::a00:1]/", "http://[100::1]/",
	"http://[100:0:0:1::1]/", "http://[2001::1]/", "http://[2001:0:a9fe:a9fe::1]/", "http://[2001:1::1]/",
	"http://[2001:2::1]/", "http://[2001:3::1]/", "http://[2001:4:112::1]/", "http://[2001:10::1]/",
	"http://[2001:20::1]/", "http://[2001:30::1]/", "http://[2001:db8::1]/", "http://[2002:a9fe:a9fe::1]/",
	"http://[2002:7f00:1::1]/", "http://[2620:4f:8000::1]/", "http://[3fff::1]/", "http://[5f00::1]/",
	"http://[fc00::1]/", "http://[fd12:3456::1]/", "http://[fe80::1]/", "http://[fe80::1%25eth0]/",
	"http://[fec0::1]/", "http://[ff02::1]/", "http://[4000::1]/",
	"http://2130706433/", "http://0x7f000001/", "http://127.1/", "http://0177.0.0.1/",
	"http://localhost/", "http://localhost:8080/h", "http://api.localhost/",
}

// Over HTTP, an admin's createWebhook and updateWebhook refuse every
// forbidden target with INVALID_INPUT on url, a message that names no
// address, and nothing saved; public targets are accepted. The only switch
// that lifts the check is INVENTORY_WEBHOOK_ALLOW_PRIVATE in the server's
// environment: neither input type has any field but the ones listed.
func TestWebhookTargetsRefusedOverHTTP(t *testing.T) {
	t.Parallel()
	ts := setup(t)
	create := `mutation($in: CreateWebhookInput!) { createWebhook(input: $in) { webhook { id } userErrors { code field message } } }`
	update := `mutation($in: UpdateWebhookInput!) { updateWebhook(input: $in) { webhook { id url } userErrors { code field message } } }`
	type payload struct {
		Webhook *struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"webhook"`
		UserErrors []struct {
			Code    string   `json:"code"`
			Field   []string `json:"field"`
			Message string   `json:"message"`
		} `json:"userErrors"`
	}
	refused := func(what, u string, p payload) {
		t.Helper()
		if p.Webhook != nil || len(p.UserErrors) != 1 || p.UserErrors[0].Code != "INVALID_INPUT" ||
			!slices.Equal(p.UserErrors[0].Field, []string{"input", "url"}) {
			t.Errorf("%s %s: %+v", what, u, p)
			return
		}
		msg := p.UserErrors[0].Message
		for _, leak := range []string{"127.0.0.1", "169.254", "a9fe", "::1"} {
			if strings.Contains(msg, leak) && !strings.Contains(u, leak) {
				t.Errorf("%s %s: message %q names %s", what, u, msg, leak)
			}
		}
	}
	for _, u := range forbiddenTargets {
		var p payload
		ts.mustData(ts.gql(ts.admin, create, map[string]any{"in": map[string]any{"url": u, "topics": []string{"STOCK_CHANGED"}}}), "createWebhook", &p)
		refused("create", u, p)
	}
	if n := ts.count(`SELECT count(*) FROM webhook_endpoints`); n != 0 {
		t.Fatalf("%d endpoints saved", n)
	}
	var p payload
	ts.mustData(ts.gql(ts.admin, create, map[string]any{"in": map[string]any{"url": "https://example.com/h", "topics": []string{"STOCK_CHANGED"}}}), "createWebhook", &p)
	if p.Webhook == nil {
		t.Fatalf("public target: %+v", p)
	}
	id := p.Webhook.ID
	for _, u := range forbiddenTargets {
		var p payload
		ts.mustData(ts.gql(ts.admin, update, map[string]any{"in": map[string]any{"id": id, "url": u}}), "updateWebhook", &p)
		refused("update", u, p)
	}
	if n := ts.count(`SELECT count(*) FROM webhook_endpoints WHERE url <> 'https://example.com/h'`); n != 0 {
		t.Fatalf("%d endpoints changed", n)
	}
	for _, u := range []string{"http://8.8.8.8/", "http://[2606:4700:4700::1111]/", "http://100.128.0.1/", "https://hooks.example.org:8443/x"} {
		var p payload
		ts.mustData(ts.gql(ts.admin, update, map[string]any{"in": map[string]any{"id": id, "url": u}}), "updateWebhook", &p)
		if p.Webhook == nil || p.Webhook.URL != u {
			t.Errorf("update to %s: %+v", u, p)
		}
	}

	// No input field lets a caller lift the check.
	type inputType struct {
		InputFields []struct{ Name string } `json:"inputFields"`
	}
	var c, u inputType
	r := ts.gql(ts.admin, `{ create: __type(name: "CreateWebhookInput") { inputFields { name } } update: __type(name: "UpdateWebhookInput") { inputFields { name } } }`, nil)
	if err := json.Unmarshal(r.Data["create"], &c); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Data["update"], &u); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range append(c.InputFields, u.InputFields...) {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, " "); got != "url topics skus locations lowStockThreshold id url topics skus locations lowStockThreshold" {
		t.Fatalf("webhook input fields: %s", got)
	}
}
