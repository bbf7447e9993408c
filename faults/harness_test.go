package faults

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/pgtest"
	"inventory/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunWithBinary(m)) }

// serverBinary is the module's main package, built once for the package
// (without -race: the server runs at its normal speed while the harness
// injects faults).
func serverBinary(t *testing.T) string { return testkit.ServerBinary(t) }

// harness is one scenario's world: a database, the environment every
// instance and CLI command of the scenario runs with (fresh secrets), keys,
// and a pool for checking outcomes in SQL.
type harness struct {
	t       *testing.T
	bin     string
	env     map[string]string
	db      *pgxpool.Pool
	client  *http.Client
	admin   string
	service string
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func newHarness(t *testing.T, dbURL string) *harness {
	t.Helper()
	h := &harness{t: t, bin: serverBinary(t), env: map[string]string{
		"LISTEN_ADDR":              "127.0.0.1:0",
		"INVENTORY_TOKEN_SECRET":   hex.EncodeToString(randomBytes(32)),
		"INVENTORY_CODES_KEY":      "faults:" + base64.StdEncoding.EncodeToString(randomBytes(32)),
		"INVENTORY_CODES_HMAC_KEY": base64.StdEncoding.EncodeToString(randomBytes(32)),
		"INVENTORY_LOG_LEVEL":      "warn",
		// Small pools: several instances of several scenarios share one
		// PostgreSQL with the other packages' tests.
		"INVENTORY_DB_MAX_CONNS":   "8",
		"INVENTORY_JOB_WORKERS":    "4",
		"INVENTORY_DB_EVENT_CONNS": "3",
	}}
	// Through PgBouncer in the topology; outcomes are checked on the primary.
	maps.Copy(h.env, pgtest.ServerEnv(t, dbURL))
	transport := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	h.client = &http.Client{Timeout: 20 * time.Second, Transport: transport}
	t.Cleanup(transport.CloseIdleConnections)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = "faults-harness"
	h.db, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.db.Close)
	return h
}

// report says what a scenario injected or verified, in the test log and on
// stdout.
func (h *harness) report(format string, args ...any) {
	h.t.Helper()
	msg := fmt.Sprintf(format, args...)
	h.t.Log(msg)
	fmt.Printf("%s: %s\n", h.t.Name(), msg)
}

// environ is the child processes' environment: ours, with the scenario's
// variables (and overrides) in place of any inherited server settings.
func (h *harness) environ(overrides map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INVENTORY_") && !strings.HasPrefix(kv, "DATABASE_") && !strings.HasPrefix(kv, "LISTEN_ADDR=") {
			env = append(env, kv)
		}
	}
	for k, v := range h.env {
		if _, ok := overrides[k]; !ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range overrides {
		env = append(env, k+"="+v)
	}
	return env
}

// cli runs one CLI command of the binary and returns its stdout; err is
// non-nil when it exits non-zero.
func (h *harness) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.environ(nil)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("inventory %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// createKeys makes the scenario's admin and service keys with the CLI,
// which prints each secret alone on its last line.
func (h *harness) createKeys() {
	h.t.Helper()
	key := func(role string) string {
		out, err := h.cli("token", "create", "--role", role, "--name", "faults-"+role)
		if err != nil {
			h.t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return strings.TrimSpace(lines[len(lines)-1])
	}
	h.admin, h.service = key("admin"), key("service")
}

// reconcile runs `inventory reconcile`, which exits 1 and prints every
// invariant that does not hold; it fails the test unless it is empty.
func (h *harness) reconcile() {
	h.t.Helper()
	if out, err := h.cli("reconcile"); err != nil {
		h.t.Errorf("reconciliation is not empty: %v\n%s", err, out)
	}
}

// tailBuffer keeps the last max bytes written to it (a server's log).
type tailBuffer struct {
	mu      sync.Mutex
	b       []byte
	max     int
	dropped bool
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append(w.b[:0:0], w.b[len(w.b)-w.max:]...)
		w.dropped = true
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dropped {
		return "…\n" + string(w.b)
	}
	return string(w.b)
}

// instance is one server process.
type instance struct {
	name    string
	url     string
	cmd     *exec.Cmd
	logs    *tailBuffer
	exited  chan struct{}
	waitErr error
}

// start runs `inventory serve` with the scenario's environment (plus
// overrides) on a loopback port and waits until it prints its URL. It is
// stopped at cleanup whatever happens; its log is shown if the test failed.
func (h *harness) start(name string, overrides map[string]string) *instance {
	h.t.Helper()
	cmd := exec.Command(h.bin, "serve")
	cmd.Env = h.environ(overrides)
	// If the test process dies without its cleanup, so does the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logs := &tailBuffer{max: 128 << 10}
	cmd.Stderr = logs
	pr, pw, err := os.Pipe()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		h.t.Fatal(err)
	}
	pw.Close()
	inst := &instance{name: name, cmd: cmd, logs: logs, exited: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "serving on "); ok {
				select {
				case urlc <- strings.Fields(rest)[0]:
				default:
				}
				continue
			}
			fmt.Fprintln(logs, line)
		}
	}()
	go func() {
		inst.waitErr = cmd.Wait()
		close(inst.exited)
	}()
	h.t.Cleanup(func() {
		inst.stop()
		if h.t.Failed() {
			h.t.Logf("log of instance %s (pid %d, %v):\n%s", name, cmd.Process.Pid, inst.waitErr, logs.String())
		}
	})
	select {
	case inst.url = <-urlc:
		// Tests start where a load balancer sends traffic: at readiness
		// (the event broker reads the stream's head a moment after the
		// listener is up, longer on a loaded machine).
		if took, ok := waitFor(30*time.Second, func() bool { return h.readyz(inst) == http.StatusOK }); !ok {
			h.t.Fatalf("instance %s not ready %s after serving\n%s", name, took, logs.String())
		}
		return inst
	case <-inst.exited:
		h.t.Fatalf("instance %s exited before serving: %v\n%s", name, inst.waitErr, logs.String())
	case <-time.After(60 * time.Second):
		h.t.Fatalf("instance %s did not serve within 60s\n%s", name, logs.String())
	}
	return nil
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (i *instance) kill9() {
	_ = i.cmd.Process.Signal(syscall.SIGKILL)
	<-i.exited
}

// stop shuts the instance down gracefully (SIGTERM), or kills it after 20s.
func (i *instance) stop() {
	select {
	case <-i.exited:
		return
	default:
	}
	_ = i.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-i.exited:
	case <-time.After(20 * time.Second):
		_ = i.cmd.Process.Kill()
		<-i.exited
	}
}

// gqlResp is a GraphQL response as the harness reads it.
type gqlResp struct {
	Status int
	Data   map[string]json.RawMessage `json:"data"`
	Errors []gqlErr                   `json:"errors"`
	raw    []byte
}

type gqlErr struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

func (r gqlResp) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// post sends one operation to the instance at url; err is a transport error
// (no HTTP answer) or an answer that is not JSON.
func (h *harness) post(ctx context.Context, url, token, query string, vars map[string]any) (gqlResp, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return gqlResp{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
	if err != nil {
		return gqlResp{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return gqlResp{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	out := gqlResp{Status: resp.StatusCode, raw: raw}
	if err != nil {
		return out, err
	}
	if jerr := json.Unmarshal(raw, &out); jerr != nil {
		return out, fmt.Errorf("HTTP %d, not JSON: %.200s", resp.StatusCode, raw)
	}
	return out, nil
}

// mutate runs an admin mutation that must succeed and have no userErrors.
func (h *harness) mutate(url, query string, vars map[string]any, field string) {
	h.t.Helper()
	r, err := h.post(context.Background(), url, h.admin, query, vars)
	if err != nil || len(r.Errors) > 0 {
		h.t.Fatalf("%s: %v %+v", field, err, r.Errors)
	}
	var p struct {
		UserErrors []map[string]any `json:"userErrors"`
	}
	if err := json.Unmarshal(r.Data[field], &p); err != nil || len(p.UserErrors) > 0 {
		h.t.Fatalf("%s: %v %s", field, err, r.Data[field])
	}
}

// stock is a catalog to load: QUANTITY SKUs with stock per location, and
// CODES SKUs with a number of codes at the first location.
type stock struct {
	locations []string // in priority order
	quantity  map[string]map[string]int
	codes     map[string]int
}

func (h *harness) loadCatalog(url string, s stock) {
	h.t.Helper()
	for i, loc := range s.locations {
		h.mutate(url, `mutation($c: String!, $p: Int!) { createLocation(input: {code: $c, name: "Faults warehouse", priority: $p}) { userErrors { code message } } }`,
			map[string]any{"c": loc, "p": i + 1}, "createLocation")
	}
	h.addSKUs(url, s)
}

// addSKUs creates s's SKUs with their stock at locations that exist.
func (h *harness) addSKUs(url string, s stock) {
	h.t.Helper()
	for sku, at := range s.quantity {
		h.mutate(url, `mutation($c: String!) { createSku(input: {code: $c, name: "Faults thing", kind: QUANTITY}) { userErrors { code message } } }`,
			map[string]any{"c": sku}, "createSku")
		for loc, q := range at {
			h.mutate(url, `mutation($c: String!, $l: String!, $q: Int!) { receiveStock(input: {sku: $c, location: $l, quantity: $q, reference: "faults"}) { userErrors { code message } } }`,
				map[string]any{"c": sku, "l": loc, "q": q}, "receiveStock")
		}
	}
	for sku, n := range s.codes {
		h.mutate(url, `mutation($c: String!) { createSku(input: {code: $c, name: "Faults codes", kind: CODES}) { userErrors { code message } } }`,
			map[string]any{"c": sku}, "createSku")
		codes := make([]string, n)
		for i := range codes {
			codes[i] = fmt.Sprintf("%s-%04d-%s", sku, i, rand.Text()[:10])
		}
		h.mutate(url, `mutation($c: String!, $l: String!, $codes: [String!]) { importCodes(input: {sku: $c, location: $l, batchRef: "faults", codes: $codes}) { userErrors { code message } } }`,
			map[string]any{"c": sku, "l": s.locations[0], "codes": codes}, "importCodes")
	}
}

// httpGet GETs url (with an admin key if token is set) and returns the
// status and body, or -1 when there is no HTTP answer.
func (h *harness) httpGet(url, token string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return -1, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *harness) readyz(i *instance) int {
	code, _ := h.httpGet(i.url+"/readyz", "")
	return code
}

// gauge reads one unlabelled metric from the instance's /metrics (admin
// key on the API port); ok is false if it is not there.
func (h *harness) gauge(i *instance, name string) (float64, bool) {
	h.t.Helper()
	code, body := h.httpGet(i.url+"/metrics", h.admin)
	if code != http.StatusOK {
		h.t.Fatalf("GET /metrics on %s: %d %.200s", i.name, code, body)
	}
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// waitFor polls cond every 50ms until it holds or timeout passes; it
// returns how long it took and whether it held.
func waitFor(timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
