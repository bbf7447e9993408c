package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"inventory/webhooks"
)

// The README's webhook verification snippet (the one "js verify" block) is
// run with Node against the Standard Webhooks specification's own example and
// against deliveries signed by this server's webhooks package (two secrets
// during a rotation): it accepts those and refuses a changed body, another
// secret, a timestamp more than 5 minutes off and a missing signature.
func TestDocsWebhookVerifySnippet(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for this test: install Node.js (make test does)")
	}
	var snippets []docBlock
	for _, file := range docFiles(t) {
		for _, b := range fencedBlocks(t, file) {
			if len(b.info) == 2 && b.info[0] == "js" && b.info[1] == "verify" {
				snippets = append(snippets, b)
			}
		}
	}
	if len(snippets) != 1 {
		t.Fatalf("want exactly one ```js verify block in README.md and docs/, found %d", len(snippets))
	}

	type check struct {
		Name    string            `json:"name"`
		Secret  string            `json:"secret"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
		Now     int64             `json:"now"`
		OK      bool              `json:"ok"`
	}
	const (
		// The example of the Standard Webhooks specification.
		specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		specTS     = 1614265330
		specBody   = `{"test": 2432232314}`
		specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	headers := func(id string, ts int64, sig string) map[string]string {
		return map[string]string{"webhook-id": id, "webhook-timestamp": itoa64(ts), "webhook-signature": sig}
	}
	oldSecret, newSecret := webhooks.NewSecret(), webhooks.NewSecret()
	now := time.Now().Unix()
	body := `{"type":"stock.changed","timestamp":"2026-11-30T12:00:00Z","data":{"seq":42,"sku":"HP","available":3}}`
	rotated := webhooks.SignatureHeader("evt_42", now, []byte(body), newSecret, oldSecret)
	checks := []check{
		{"the specification's example", specSecret, headers(specID, specTS, specSig), specBody, specTS, true},
		{"ours, current secret", newSecret, headers("evt_42", now, rotated), body, now, true},
		{"ours, previous secret during a rotation", oldSecret, headers("evt_42", now, rotated), body, now, true},
		{"a changed body", newSecret, headers("evt_42", now, rotated), strings.Replace(body, `"available":3`, `"available":9`, 1), now, false},
		{"another secret", webhooks.NewSecret(), headers("evt_42", now, rotated), body, now, false},
		{"another webhook-id", newSecret, headers("evt_43", now, rotated), body, now, false},
		{"6 minutes late", newSecret, headers("evt_42", now, rotated), body, now + 360, false},
		{"6 minutes early", newSecret, headers("evt_42", now, rotated), body, now - 360, false},
		{"no signature", newSecret, map[string]string{"webhook-id": "evt_42", "webhook-timestamp": itoa64(now)}, body, now, false},
		{"no timestamp", newSecret, map[string]string{"webhook-id": "evt_42", "webhook-signature": rotated}, body, now, false},
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "verify.mjs"), []byte(snippets[0].text), 0o644); err != nil {
		t.Fatal(err)
	}
	const harness = `import { verifyWebhook } from "./verify.mjs";
for (const c of JSON.parse(process.env.CHECKS)) {
  Date.now = () => c.now * 1000;
  let ok = false, why = "";
  try { ok = verifyWebhook(c.secret, c.headers, c.body) !== undefined; } catch (e) { why = e.message; }
  console.log(JSON.stringify({name: c.name, ok, why}));
}
`
	if err := os.WriteFile(filepath.Join(dir, "harness.mjs"), []byte(harness), 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(checks)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "harness.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHECKS="+string(raw))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s:%d: node: %v\n%s", snippets[0].file, snippets[0].line, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(checks) {
		t.Fatalf("%d results for %d checks:\n%s", len(lines), len(checks), out)
	}
	for i, line := range lines {
		var got struct {
			Name string `json:"name"`
			OK   bool   `json:"ok"`
			Why  string `json:"why"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil || got.Name != checks[i].Name {
			t.Fatalf("result %d: %q (%v)", i, line, err)
		}
		if got.OK != checks[i].OK {
			t.Errorf("%s:%d: %s: verified=%v, want %v (%s)", snippets[0].file, snippets[0].line, got.Name, got.OK, checks[i].OK, got.Why)
		}
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
