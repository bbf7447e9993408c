package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"inventory/testkit"
)

// The documentation's examples are tests, so they cannot drift from the
// server:
//
//   - every fenced block whose info string is "sh test" (README.md,
//     docs/*.md) runs with bash against a real server of its own per file
//     (setupWith, with the demo catalog loaded). The blocks of one file run in
//     order in one bash process with `set -euo pipefail`, so a block can set
//     variables (SERVICE_KEY, CHECKOUT_TOKEN, …) that the next one uses. A
//     block fails when bash fails in it, or when its output carries a GraphQL
//     error ("errors":[) or a user error ("userErrors":[{);
//   - every file's blocks run twice in a row on one database, each run in a
//     new bash, and a guide's after the README's tour, as a newcomer runs
//     them on one make run database: a walk-through must work on a database
//     that has already seen it (names that must be new, such as key names,
//     request keys and order refs, carry the run's RUN);
//   - the "js test" block (the graphql-ws subscription) runs with the Node and
//     the packages of testdata/node-client, and must print an event;
//   - README.md stays under 8 KB.
//
// The snippets are written as a user types them in the repository root of a
// `make run` checkout: they say localhost:8080 and bin/inventory. The test
// replaces "localhost:8080" with the test server's host:port before running
// a block, and runs bash in a temporary directory holding bin/inventory
// (built once from this package), a copy of examples/ and a .data/dev.env
// with the server's settings and ADMIN_TOKEN, as make run writes it. The
// README's tour must load that file itself (set -a; . .data/dev.env; set +a):
// its blocks get no server settings in their environment. The docs/ guides
// say they assume a shell that has loaded it, so their blocks get
// DATABASE_URL, INVENTORY_TOKEN_SECRET, INVENTORY_CODES_KEY,
// INVENTORY_CODES_HMAC_KEY and ADMIN_TOKEN exported.

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string
	line int      // of the opening fence
	info []string // the info string's words, e.g. ["sh", "test"]
	text string   // the content, without the fence's indentation
}

func (b docBlock) is(lang string) bool {
	return len(b.info) >= 2 && b.info[0] == lang && containsWord(b.info[1:], "test")
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// fencedBlocks returns every ``` block of a Markdown file, in order.
func fencedBlocks(t *testing.T, file string) []docBlock {
	t.Helper()
	raw, err := os.ReadFile(repo(file))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []docBlock
	var cur *docBlock
	var indent string
	var body []string
	for i, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if strings.HasPrefix(trimmed, "```") {
				indent = line[:len(line)-len(trimmed)]
				cur = &docBlock{file: file, line: i + 1, info: strings.Fields(strings.TrimPrefix(trimmed, "```"))}
				body = nil
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			cur.text = strings.Join(body, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		body = append(body, strings.TrimPrefix(line, indent))
	}
	if cur != nil {
		t.Fatalf("%s:%d: code block never closed", file, cur.line)
	}
	return blocks
}

// docFiles are README.md and every Markdown page under docs/, however deep,
// as paths from the repository's root: no page silently stops being tested.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(repo("docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(repo(), path)
			files = append(files, rel)
			return err
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDocsREADMESize(t *testing.T) {
	fi, err := os.Stat(repo("README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= 8192 {
		t.Fatalf("README.md is %d bytes; keep it under 8 KB (8192) and move detail into docs/", fi.Size())
	}
}

// buildDocsBinary returns a directory whose inventory is the server binary,
// as bin/ is after make run.
func buildDocsBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testkit.ServerBinary(t), filepath.Join(bin, "inventory")); err != nil {
		t.Fatal(err)
	}
	return bin
}

// docsWorkDir makes a directory that looks like the repository root after
// make run: bin/inventory, examples/ and .data/dev.env.
func docsWorkDir(t *testing.T, bin string, ts *testServer) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(repo("examples"))); err != nil {
		t.Fatal(err)
	}
	var env strings.Builder
	for _, k := range []string{"INVENTORY_TOKEN_SECRET", "INVENTORY_CODES_KEY", "INVENTORY_CODES_HMAC_KEY", "DATABASE_URL"} {
		fmt.Fprintf(&env, "%s=%s\n", k, ts.env[k])
	}
	fmt.Fprintf(&env, "ADMIN_TOKEN=%s\n", ts.admin)
	if err := os.MkdirAll(filepath.Join(dir, ".data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".data", "dev.env"), []byte(env.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serverSettings are the variables a snippet must not inherit from the
// environment go test runs in.
var serverSettings = regexp.MustCompile(`^(DATABASE_URL|ADMIN_TOKEN|LISTEN_ADDR|INVENTORY_[A-Z0-9_]*)=`)

func TestDocsShellSnippets(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is required to run the documentation's examples")
	}
	bin := buildDocsBinary(t)
	shBlocks := func(file string) []docBlock {
		var blocks []docBlock
		for _, b := range fencedBlocks(t, file) {
			if b.is("sh") {
				blocks = append(blocks, b)
			}
		}
		return blocks
	}
	tour := shBlocks("README.md")
	if len(tour) == 0 {
		t.Fatal("no ```sh test blocks found in README.md")
	}
	for _, file := range docFiles(t) {
		blocks := shBlocks(file)
		if len(blocks) == 0 {
			continue
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			ts := setupWith(t, nil)
			ts.cli("demo")
			// A newcomer takes the tour first, then a guide; and comes back
			// to a walk-through on the same make run database: each must
			// work on a database that has already seen it, so each runs
			// twice in a row, in a new shell each time.
			if file != "README.md" {
				runShellBlocks(t, ts, bin, "README.md", tour, "the tour before "+filepath.Base(file))
			}
			for run := 1; run <= 2; run++ {
				runShellBlocks(t, ts, bin, file, blocks, fmt.Sprintf("run %d", run))
				if file == "README.md" {
					// Each tour ends with a confirmed order of its own.
					if n := ts.count(`SELECT count(*) FROM orders o WHERE o.checkout_id = 'cart-42' AND
						(SELECT sum(l.quantity) FROM order_lines l JOIN skus s ON s.id = l.sku_id
						 WHERE l.order_id = o.id AND s.code = 'HEADPHONES-BLK') = 2`); n != run {
						t.Fatalf("after tour %d: %d confirmed orders of 2 HEADPHONES-BLK, want %d", run, n, run)
					}
				}
			}
		})
	}
}

// runShellBlocks runs the blocks of one file, in order, in one bash process;
// run names the run in failures ("the tour before it", "run 2").
func runShellBlocks(t *testing.T, ts *testServer, bin, file string, blocks []docBlock, run string) {
	t.Helper()
	hostPort := strings.TrimPrefix(ts.url, "http://")
	const marker = "@@docs-test-block"
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "printf '\\n%s %d@@\\n'\n", marker, i)
		script.WriteString(strings.ReplaceAll(b.text, "localhost:8080", hostPort))
	}
	fmt.Fprintf(&script, "printf '\\n%s end@@\\n'\n", marker)

	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !serverSettings.MatchString(kv) {
			env = append(env, kv)
		}
	}
	if file != "README.md" {
		for _, k := range []string{"DATABASE_URL", "INVENTORY_TOKEN_SECRET", "INVENTORY_CODES_KEY", "INVENTORY_CODES_HMAC_KEY"} {
			env = append(env, k+"="+ts.env[k])
		}
		env = append(env, "ADMIN_TOKEN="+ts.admin)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = docsWorkDir(t, bin, ts)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()

	// Split the output at the markers: outputs[i] is block i's.
	outputs := make([]string, len(blocks))
	last, finished := -1, false
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, marker+" "); ok {
			if rest == "end@@" {
				finished = true
				continue
			}
			fmt.Sscanf(rest, "%d@@", &last)
			continue
		}
		if last >= 0 && line != "" {
			outputs[last] += line + "\n"
		}
	}
	fail := func(i int, why string) {
		b := blocks[i]
		t.Fatalf("%s:%d: example %d of %s (%s) %s\n--- block (localhost:8080 is %s here) ---\n%s--- output ---\n%s",
			b.file, b.line, i+1, b.file, run, why, hostPort, b.text, outputs[i])
	}
	if runErr != nil || !finished {
		if last < 0 {
			t.Fatalf("%s (%s): bash failed before the first block: %v\n%s", file, run, runErr, out.String())
		}
		fail(last, fmt.Sprintf("failed (%v)", runErr))
	}
	for i, o := range outputs {
		if strings.Contains(o, `"errors":[`) || strings.Contains(o, `"userErrors":[{`) {
			fail(i, "answered with an error")
		}
	}
	if testing.Verbose() {
		for i, o := range outputs {
			t.Logf("%s:%d: example %d (%s) output:\n%s", file, blocks[i].line, i+1, run, o)
		}
	}
	t.Logf("%s (%s): %d examples ran", file, run, len(blocks))
}

// TestDocsJSSubscription runs the documentation's graphql-ws example with the
// Node and packages that make test installs (testdata/node-client), against
// a test server, and checks that it prints the status of a reservation the
// test makes and releases.
func TestDocsJSSubscription(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for this test: install Node.js (make test runs npm ci in testdata/node-client)")
	}
	var snippets []docBlock
	for _, file := range docFiles(t) {
		for _, b := range fencedBlocks(t, file) {
			if b.is("js") && strings.Contains(b.text, "reservationChanged") { // the other: TestDocsJSAvailability
				snippets = append(snippets, b)
			}
		}
	}
	if len(snippets) != 1 {
		t.Fatalf("want exactly one ```js test block on reservationChanged in README.md and docs/, found %d", len(snippets))
	}
	snippet := snippets[0]
	if !strings.Contains(snippet.text, "ws://localhost:8080/graphql") || !strings.Contains(snippet.text, "process.env.CHECKOUT_TOKEN") {
		t.Fatalf("%s:%d: the example should connect to ws://localhost:8080/graphql with process.env.CHECKOUT_TOKEN", snippet.file, snippet.line)
	}

	ts := setupWith(t, nil)
	ts.cli("demo")
	var tok struct{ Token string }
	ts.mustData(ts.gql(ts.service, `mutation { issueCheckoutToken(checkoutId: "cart-42", ttlSeconds: 900) { token } }`, nil), "issueCheckoutToken", &tok)

	// Written inside testdata/node-client so that its node_modules resolve.
	f, err := os.CreateTemp("testdata/node-client", "docs-snippet-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	wsURL := "ws" + strings.TrimPrefix(ts.url, "http") + "/graphql"
	if _, err := f.WriteString(strings.ReplaceAll(snippet.text, "ws://localhost:8080/graphql", wsURL)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Base(f.Name()))
	cmd.Dir = "testdata/node-client"
	cmd.Env = append(os.Environ(), "CHECKOUT_TOKEN="+tok.Token)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()

	// The client gives no sign of having subscribed, so reserve and release
	// until it reports a release.
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; !strings.Contains(out.String(), "RELEASED"); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%s:%d: the example printed no RELEASED status; its output:\n%s", snippet.file, snippet.line, out.String())
		}
		var res struct{ Reservation struct{ ID string } }
		ts.mustData(ts.gql(tok.Token, `mutation($k: String!) { reserve(input: {checkoutId: "cart-42", requestKey: $k, lines: [{sku: "USB-C-CABLE", quantity: 1}]}) { reservation { id } userErrors { code } } }`,
			map[string]any{"k": fmt.Sprintf("docs-%d", i)}), "reserve", &res)
		ts.gql(tok.Token, `mutation($id: ID!) { releaseReservation(input: {id: $id}) { userErrors { code } } }`, map[string]any{"id": res.Reservation.ID})
		time.Sleep(300 * time.Millisecond)
	}
}
