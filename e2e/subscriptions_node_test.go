package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStockChangedWithGraphQLWSClient subscribes with a real third-party
// client, the graphql-ws npm package running in Node, rather than frames
// written by hand. make test installs it (testdata/node-client).
func TestStockChangedWithGraphQLWSClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for this test: install Node.js (make test runs npm ci in testdata/node-client)")
	}
	ts := setup(t)
	ts.seed("HP", 5)
	ts.gql(ts.admin, `mutation { adjustStock(input: {sku: "HP", location: "AMS", delta: -2, reason: "damaged", reference: "x"}) { userErrors { code } } }`, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", "ws"+strings.TrimPrefix(ts.url, "http")+"/graphql", ts.admin, "0", "3")
	cmd.Dir = "testdata/node-client"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The third event happens while the client is subscribed.
	time.Sleep(time.Second)
	ts.gql(ts.admin, `mutation { receiveStock(input: {sku: "HP", location: "AMS", quantity: 4, reference: "r"}) { userErrors { code } } }`, nil)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node client: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var got []wsEvent
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var e wsEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, e)
	}
	requireDense(t, got, 1)
	if len(got) != 3 || got[0].Cause != "RECEIVED" || got[1].Cause != "ADJUSTED" || got[2].OnHand != 7 {
		t.Fatalf("events: %+v", got)
	}
}
