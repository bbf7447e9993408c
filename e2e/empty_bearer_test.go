package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// emptyBearerMessage is what a caller whose token variable came out empty
// (`-H "Authorization: Bearer $SERVICE_KEY"` with SERVICE_KEY unset) is told.
const emptyBearerMessage = `authentication required: the bearer token is empty: "Bearer " must be followed by a token (is the variable holding it empty?)`

// rawPost sends a POST /graphql over a plain TCP connection with the
// Authorization header written byte for byte as given (Go's client trims
// the trailing space that curl sends), and decodes the answer.
func rawPost(t *testing.T, baseURL, authorization, query string) gqlResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(baseURL, "http://")
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		host, authorization, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := gqlResponse{Status: resp.StatusCode}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("answer is not JSON (%d): %s", resp.StatusCode, raw)
	}
	return out
}

// TestEmptyBearerToken: a bearer header with no token after it (a shell
// variable that came out empty) is told exactly that, over HTTP and on a
// WebSocket, not that the header is malformed; a header of another scheme
// still gets the malformed-header message; and nothing is reserved.
func TestEmptyBearerToken(t *testing.T) {
	t.Parallel()
	ts := setupWith(t, map[string]string{"INVENTORY_RATE_LIMIT_AUTH_FAILURES": "0"})
	ts.seed("HP-1", 10)
	const reserve = `mutation { reserve(input: {checkoutId: "cart-1", requestKey: "k1", lines: [{sku: "HP-1", quantity: 1}]}) { reservation { id } userErrors { code } } }`

	for _, header := range []string{"Bearer ", "Bearer", "Bearer   ", "Bearer \t", "bearer "} {
		r := rawPost(t, ts.url, header, reserve)
		if r.errorCode() != "UNAUTHENTICATED" || r.Errors[0].Message != emptyBearerMessage {
			t.Errorf("Authorization %q: got %d %+v, want UNAUTHENTICATED %q", header, r.Status, r.Errors, emptyBearerMessage)
		}
	}
	// Go's client, as most clients, sends "Bearer " as "Bearer".
	if r := ts.gqlAuth("Bearer ", reserve, nil); r.errorCode() != "UNAUTHENTICATED" || r.Errors[0].Message != emptyBearerMessage {
		t.Errorf("Go client, Authorization \"Bearer \": got %+v", r.Errors)
	}
	const malformed = `authentication required: the Authorization header must be "Bearer <token>"`
	for _, header := range []string{"Basic " + ts.admin, ts.admin, "Bearer" + ts.admin} {
		if r := rawPost(t, ts.url, header, reserve); r.errorCode() != "UNAUTHENTICATED" || r.Errors[0].Message != malformed {
			t.Errorf("Authorization %q: got %+v, want %q", header, r.Errors, malformed)
		}
	}
	if n := ts.count(`SELECT count(*) FROM reservations`); n != 0 {
		t.Fatalf("refused reserves made %d reservations", n)
	}
	// The scheme's name is case-insensitive (RFC 9110 §11.1).
	for _, scheme := range []string{"bearer", "BEARER"} {
		if r := rawPost(t, ts.url, scheme+" "+ts.service, reserve); len(r.Errors) != 0 {
			t.Errorf("Authorization %q: %+v", scheme+" <service key>", r.Errors)
		}
	}
	if n := ts.count(`SELECT count(*) FROM reservations`); n != 1 {
		t.Fatalf("the same reserve twice made %d reservations, want 1", n)
	}

	// On a WebSocket: in connection_init's payload, and on the upgrade
	// request (connection_init without one). A close reason is at most 123
	// bytes: the message must fit whole.
	want := strings.TrimPrefix(emptyBearerMessage, "authentication required: ")
	if len(want) > 123 {
		t.Fatalf("the message is %d bytes, longer than a WebSocket close reason may be", len(want))
	}
	c := dialWSNoInit(t, ts.url)
	c.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{"Authorization": "Bearer "})})
	if code, reason := c.closeCode(5 * time.Second); code != 4401 || reason != want {
		t.Errorf("connection_init with \"Bearer \": closed %d %q, want 4401 %q", code, reason, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"},
		HTTPHeader:   http.Header{"Authorization": {"Bearer "}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.CloseNow() })
	c = &wsClient{t: t, conn: conn}
	c.send(wsMessage{Type: "connection_init", Payload: mustJSON(map[string]any{})})
	if code, reason := c.closeCode(5 * time.Second); code != 4401 || reason != want {
		t.Errorf("upgrade with \"Bearer \": closed %d %q, want 4401 %q", code, reason, want)
	}
}
