package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/app"
	"inventory/cli"
	"inventory/config"
	"inventory/pgtest"
)

// Fixed test keys (32 bytes each, base64), so tests can also open codes
// directly.
var (
	testCodesKey = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("c", 32)))
	testHMACKey  = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("h", 32)))
)

// testServer is the real application (startServer's wiring) on a free port of
// its own database, with an admin and a service key made through the CLI.
type testServer struct {
	t        *testing.T
	url      string
	env      map[string]string
	db       *pgxpool.Pool // for checking outcomes in SQL
	admin    string
	service  string
	shutdown func() error
	logs     syncBuffer // what the server logged, at INVENTORY_LOG_LEVEL
}

// syncBuffer is a bytes.Buffer that the server may write while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func setup(t *testing.T) *testServer {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with some environment variables set differently.
func setupWith(t *testing.T, overrides map[string]string) *testServer {
	t.Helper()
	dbURL := pgtest.NewDatabase(t)
	env := map[string]string{
		"LISTEN_ADDR":              "127.0.0.1:0",
		"INVENTORY_TOKEN_SECRET":   strings.Repeat("t", 32),
		"INVENTORY_CODES_KEY":      "k1:" + testCodesKey,
		"INVENTORY_CODES_HMAC_KEY": testHMACKey,
		"INVENTORY_DB_MAX_CONNS":   "10",
		"INVENTORY_LOG_LEVEL":      "warn",
	}
	maps.Copy(env, pgtest.ServerEnv(t, dbURL)) // through PgBouncer in the topology
	maps.Copy(env, overrides)
	// Outcomes are checked on the primary itself.
	db, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ts := &testServer{t: t, env: env, db: db}
	ts.url, ts.shutdown = ts.startInstance()
	ts.admin = ts.cli("token", "create", "--role", "admin", "--name", "test-admin")
	ts.service = ts.cli("token", "create", "--role", "service", "--name", "test-service")
	return ts
}

// startInstance boots one more server process-equivalent on the same
// database, as a second instance behind a load balancer would be, and returns
// its URL and a shutdown function (also run at cleanup if not called), once
// the instance is ready.
//
// An instance is ready only once its event broker has read the stream's head
// ("live events unavailable: starting" until then), which on a loaded machine
// can take a moment after the listener is up; a subscription made before
// that starts from the head the broker reads, after a write the test made
// meanwhile. Tests start where a load balancer would send traffic: at
// readiness (TestServerEndToEnd's first /readyz failed once on a fresh clone
// when setup did not wait).
func (ts *testServer) startInstance() (string, func() error) {
	ts.t.Helper()
	url, shutdown := ts.startInstanceUnready()
	waitReady(ts.t, url)
	return url, shutdown
}

// waitReady waits, with a bound, for the instance at url to answer /readyz
// with 200.
func waitReady(t *testing.T, url string) {
	t.Helper()
	waitUntil(t, 30*time.Second, "the instance to be ready", func() bool { return probeReady(t, url) })
}

// startInstanceUnready is startInstance without waiting for readiness, for
// a test of an instance that cannot become ready.
func (ts *testServer) startInstanceUnready() (string, func() error) {
	t := ts.t
	t.Helper()
	cfg, err := config.Load(func(k string) string { return ts.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := app.Start(ctx, cfg, app.NewLogger(io.MultiWriter(testWriter{t}, &ts.logs), cfg.LogLevel))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	var shutdownErr error
	shutdown := func() error {
		once.Do(func() { cancel(); shutdownErr = srv.Wait() })
		return shutdownErr
	}
	t.Cleanup(func() {
		if err := shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv.URL, shutdown
}

// cli runs one CLI command against the test database and returns the last
// line of its output.
func (ts *testServer) cli(args ...string) string {
	ts.t.Helper()
	var out bytes.Buffer
	if err := cli.Run(context.Background(), args, func(k string) string { return ts.env[k] }, &out, testWriter{ts.t}); err != nil {
		ts.t.Fatalf("inventory %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// gqlResponse is a GraphQL response with the parts tests look at.
type gqlResponse struct {
	Status int
	Data   map[string]json.RawMessage
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
}

// errorCode is the first error's extensions.code, or "".
func (r gqlResponse) errorCode() string {
	if len(r.Errors) == 0 {
		return ""
	}
	code, _ := r.Errors[0].Extensions["code"].(string)
	return code
}

// gql POSTs one operation with an optional bearer token.
func (ts *testServer) gql(token, query string, vars map[string]any) gqlResponse {
	ts.t.Helper()
	header := ""
	if token != "" {
		header = "Bearer " + token
	}
	return ts.gqlAuth(header, query, vars)
}

// gqlAuth POSTs one operation with the Authorization header given verbatim.
func (ts *testServer) gqlAuth(authorization, query string, vars map[string]any) gqlResponse {
	ts.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		ts.t.Fatal(err)
	}
	return ts.post(authorization, "application/json", body)
}

// post sends a raw body to /graphql.
func (ts *testServer) post(authorization, contentType string, body []byte) gqlResponse {
	ts.t.Helper()
	r, err := postTo(ts.url, authorization, contentType, body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return r
}

// postTo sends a raw body to /graphql of the instance at url. It does not
// touch testing.T, so goroutines can call it.
func postTo(url, authorization, contentType string, body []byte) (gqlResponse, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return gqlResponse{}, err
	}
	req.Header.Set("Content-Type", contentType)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return gqlResponse{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return gqlResponse{}, err
	}
	out := gqlResponse{Status: resp.StatusCode}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("response is not JSON (%d): %s", resp.StatusCode, raw)
	}
	return out, nil
}

// gqlTo POSTs one operation as bearer token (none: anonymous) to the
// instance at url, from any goroutine.
func gqlTo(url, token, query string, vars map[string]any) (gqlResponse, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return gqlResponse{}, err
	}
	authorization := ""
	if token != "" {
		authorization = "Bearer " + token
	}
	return postTo(url, authorization, "application/json", body)
}

// mustData fails the test on any GraphQL error and decodes data[field] into v.
func (ts *testServer) mustData(r gqlResponse, field string, v any) {
	ts.t.Helper()
	if len(r.Errors) > 0 {
		ts.t.Fatalf("unexpected errors: %+v", r.Errors)
	}
	if err := json.Unmarshal(r.Data[field], v); err != nil {
		ts.t.Fatalf("decode %s: %v (%s)", field, err, r.Data[field])
	}
}

// count runs a SQL count on the test database.
func (ts *testServer) count(sql string) int {
	ts.t.Helper()
	var n int
	if err := ts.db.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		ts.t.Fatal(err)
	}
	return n
}

// probeClient connects from addresses of its own, as a load balancer's
// health checks do: every path spends its caller's rate budget, and a
// test's own budget (often set tiny) must start whole. Each probe comes
// from the next address of 127.2.0.0/16 on a new connection, so probing an
// instance that is slow to become ready on a loaded machine never spends a
// budget of six reads and sees 429 until its deadline.
var probeClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
	DisableKeepAlives: true,
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		n := probeAddrs.Add(1)
		from := &net.TCPAddr{IP: net.IPv4(127, 2, byte(n/250%250), byte(n%250+1))}
		return (&net.Dialer{LocalAddr: from}).DialContext(ctx, network, addr)
	}}}

// probeAddrs counts probeClient's connections.
var probeAddrs atomic.Uint32

// probeReady says whether the instance at url answers /readyz with 200.
func probeReady(t *testing.T, url string) bool {
	t.Helper()
	resp, err := probeClient.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// exec runs one statement against the test database (to set up a state no
// API call can reach, such as data written by an older version).
func (ts *testServer) exec(sql string) {
	ts.t.Helper()
	if _, err := ts.db.Exec(context.Background(), sql); err != nil {
		ts.t.Fatalf("%s: %v", sql, err)
	}
}

// seed creates a location AMS and a QUANTITY SKU with stock there, received
// under a reference of its own (receipts are idempotent per reference).
func (ts *testServer) seed(sku string, onHand int) {
	ts.t.Helper()
	var p map[string]any
	if ts.count("SELECT count(*) FROM locations WHERE code = 'AMS'") == 0 {
		ts.mustData(ts.gql(ts.admin, `mutation { createLocation(input: {code: "AMS", name: "Amsterdam", priority: 1}) { userErrors { code } } }`, nil), "createLocation", &p)
	}
	ts.mustData(ts.gql(ts.admin, `mutation($c: String!) { createSku(input: {code: $c, name: "Thing", kind: QUANTITY}) { userErrors { code } } }`,
		map[string]any{"c": sku}), "createSku", &p)
	ts.mustData(ts.gql(ts.admin, `mutation($c: String!, $q: Int!, $r: String!) { receiveStock(input: {sku: $c, location: "AMS", quantity: $q, reference: $r}) { userErrors { code } } }`,
		map[string]any{"c": sku, "q": onHand, "r": "PO-seed-" + sku}), "receiveStock", &p)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	return httpGetAs(t, url, "")
}

// httpGetAs GETs url with token as bearer ("" for none).
func httpGetAs(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// testWriter sends the server's log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
