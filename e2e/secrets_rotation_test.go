package e2e

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/codecrypt"
	"inventory/webhooks"
)

// signedReceiver answers 204 and reports, per delivery, which of the given
// secrets its signature verifies with.
func signedReceiver(t *testing.T) (url string, got chan func(secret string) error) {
	t.Helper()
	got = make(chan func(string) error, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := r.Header.Clone()
		got <- func(secret string) error {
			return webhooks.Verify(secret, h.Get(webhooks.HeaderID), h.Get(webhooks.HeaderTimestamp), b, h.Get(webhooks.HeaderSignature), time.Now(), 5*time.Minute)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/h", got
}

// sendTest sends a webhook.test delivery to id through the server at url and
// returns how the receiver checked it.
func sendTest(t *testing.T, url, admin, id string, got chan func(string) error) func(string) error {
	t.Helper()
	r, err := gqlTo(url, admin, `mutation($id: ID!) { sendTestWebhook(id: $id) { delivery { statusCode error } userErrors { code } } }`, map[string]any{"id": id})
	if err != nil || len(r.Errors) != 0 {
		t.Fatalf("sendTestWebhook: %v %+v", err, r.Errors)
	}
	select {
	case check := <-got:
		return check
	case <-time.After(10 * time.Second):
		t.Fatal("no test delivery arrived")
		return nil
	}
}

// TestWebhookSecretsSealedAtRest: a webhook's signing secret is not in its
// row (neither the whsec_ string nor its key bytes), deliveries still verify
// with it, a row stored in plaintext by an earlier version is sealed when an
// instance starts and keeps signing with the same secret, and after a
// rotation both secrets verify. Before the fix the secret column held the
// whsec_ string itself.
func TestWebhookSecretsSealedAtRest(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	url, got := signedReceiver(t)
	var p webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED]}) { secret webhook { id } userErrors { code } } }`,
		map[string]any{"u": url}), "createWebhook", &p)
	secret, id := *p.Secret, p.Webhook.ID
	notStored := func(when, s string) {
		t.Helper()
		var row []byte
		if err := ts.db.QueryRow(t.Context(), `SELECT convert_to(webhook_endpoints::text, 'UTF8') || coalesce(secret_sealed, '') || coalesce(previous_secret_sealed, '')
			FROM webhook_endpoints WHERE id = $1`, id).Scan(&row); err != nil {
			t.Fatal(err)
		}
		sraw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, webhooks.SecretPrefix))
		if bytes.Contains(row, []byte(s)) || bytes.Contains(row, sraw) || bytes.Contains(row, []byte(strings.TrimPrefix(s, webhooks.SecretPrefix))) {
			t.Fatalf("%s: the stored row holds the secret", when)
		}
		if n := ts.count(`SELECT count(*) FROM webhook_endpoints WHERE secret IS NOT NULL OR previous_secret IS NOT NULL OR secret_key_id <> 'k1'`); n != 0 {
			t.Fatalf("%s: %d rows with a plaintext secret or not sealed under k1", when, n)
		}
	}
	notStored("created", secret)
	if err := sendTest(t, ts.url, ts.admin, id, got)(secret); err != nil {
		t.Fatalf("delivery does not verify with the secret: %v", err)
	}

	// A row as an earlier version stored it: plaintext only.
	old := webhooks.NewSecret()
	ts.exec(`UPDATE webhook_endpoints SET secret = '` + old + `', secret_sealed = NULL, secret_key_id = NULL`)
	other, _ := ts.startInstance()
	notStored("sealed at start-up", old)
	if err := sendTest(t, other, ts.admin, id, got)(old); err != nil {
		t.Fatalf("after sealing at start-up the delivery does not verify with the old secret: %v", err)
	}

	// Rotation: the new secret is sealed too, and both sign meanwhile.
	var rp webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret webhook { id } userErrors { code } } }`,
		map[string]any{"id": id}), "rotateWebhookSecret", &rp)
	notStored("rotated (new)", *rp.Secret)
	notStored("rotated (previous)", old)
	check := sendTest(t, ts.url, ts.admin, id, got)
	for _, s := range []string{*rp.Secret, old} {
		if err := check(s); err != nil {
			t.Fatalf("after rotation a delivery does not verify with %.10s…: %v", s, err)
		}
	}
}

// TestCodesRekeyCommand: `inventory codes rekey` moves every stored code and
// webhook secret from k1 to k2 (checked in SQL), plaintexts unchanged; run
// again it has nothing to do; then an instance starts with k1 removed from
// INVENTORY_CODES_KEY, reveals the same codes and signs deliveries with the
// same secret. Before, an instance without k1 refused to start (stored codes
// use key "k1") and no command could move them.
func TestCodesRekeyCommand(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_WEBHOOK_ALLOW_PRIVATE": "true"})
	var p map[string]any
	ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "AMS", name: "Amsterdam"}) { userErrors { code } } }`, nil), "createLocation", &p)
	ts.mustData(ts.gql(ts.admin, `mutation { createSku(input: {code: "GC", name: "Gift card", kind: CODES}) { userErrors { code } } }`, nil), "createSku", &p)
	var lines []string
	for i := range 50 {
		lines = append(lines, "REKEY-"+strings.Repeat("X", i%3)+string(rune('A'+i%26))+"-"+time.Duration(i).String())
	}
	path := filepath.Join(t.TempDir(), "codes.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	ts.cli("import", "--sku", "GC", "--location", "AMS", "--batch", "B1", path)
	url, got := signedReceiver(t)
	var w webhookPayloadJSON
	ts.mustData(ts.gql(ts.admin, `mutation($u: String!) { createWebhook(input: {url: $u, topics: [STOCK_CHANGED]}) { secret webhook { id } userErrors { code } } }`,
		map[string]any{"u": url}), "createWebhook", &w)

	plaintexts := func(keys string) map[int64]string {
		ring, err := codecrypt.ParseKeyring(keys, testHMACKey)
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := ts.db.Query(t.Context(), `SELECT id, sku_id, key_id, ciphertext FROM codes`)
		out := map[int64]string{}
		var id, sku int64
		var kid string
		var ct []byte
		if _, err := pgx.ForEachRow(rows, []any{&id, &sku, &kid, &ct}, func() error {
			code, err := ring.Open(sku, kid, ct)
			out[id] = code
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := plaintexts("k1:" + testCodesKey)
	if len(before) != 50 {
		t.Fatalf("%d codes imported", len(before))
	}

	k2 := codecrypt.NewKey()
	ts.env["INVENTORY_CODES_KEY"] = "k2:" + k2 + ",k1:" + testCodesKey
	if out := ts.cli("codes", "rekey", "--batch", "7"); !strings.Contains(out, "k1 may now be removed") {
		t.Fatalf("codes rekey: %q", out)
	}
	if n := ts.count(`SELECT count(*) FROM codes WHERE key_id <> 'k2'`); n != 0 {
		t.Fatalf("%d codes not under k2", n)
	}
	if n := ts.count(`SELECT count(*) FROM webhook_endpoints WHERE secret_key_id <> 'k2' OR secret IS NOT NULL`); n != 0 {
		t.Fatalf("%d webhook secrets not under k2", n)
	}
	if out := ts.cli("codes", "rekey"); !strings.Contains(out, "nothing to re-encrypt") {
		t.Fatalf("second codes rekey: %q", out)
	}
	ts.env["INVENTORY_CODES_KEY"] = "k2:" + k2
	after := plaintexts("k2:" + k2)
	for id, code := range before {
		if after[id] != code {
			t.Fatalf("code %d was %q, is %q", id, code, after[id])
		}
	}
	onlyK2, _ := ts.startInstance() // the start-up key check passes without k1
	if err := sendTest(t, onlyK2, ts.admin, w.Webhook.ID, got)(*w.Secret); err != nil {
		t.Fatalf("delivery after the rekey does not verify with the secret: %v", err)
	}
}
