package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"inventory/pgtest"
)

// makeRun starts scripts/run.sh (what make run runs) on its own database,
// port and dev directory, so the developer's own .data is not touched.
func makeRun(t *testing.T, databaseURL, listen, devDir string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command("bash", repo("scripts/run.sh"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+databaseURL, "LISTEN_ADDR="+listen, "INVENTORY_DEV_DIR="+devDir, "INVENTORY_LOG_LEVEL=warn")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd, out
}

// freeAddr is a loopback address with a port nothing listens on (for a
// process that must bind it itself). The port is below Linux's ephemeral
// range (32768 up), where every other test's server binds port 0: a port
// taken from there and closed went to another test's server before make
// run could bind it, and TestMakeRunTwice then read that server's /readyz
// (it FAILED once in CI so, 1.4 s in, with no dev.env written).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(10000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		return addr
	}
	t.Fatal("no free port in 20000..29999")
	return ""
}

// devEnv reads NAME from a dev.env file.
func devEnv(t *testing.T, path, name string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	value := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+"="); ok {
			value = v
		}
	}
	return value
}

// TestMakeRunTwice: a second make run while one serves stops at once saying
// the port is in use, and the first server's admin key still works; the
// settings and key a second shell needs are in dev.env; make stop stops the
// server and not DATABASE_URL's PostgreSQL.
func TestMakeRunTwice(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	addr := freeAddr(t)
	dir := t.TempDir()
	_, out := makeRun(t, url, addr, dir)
	waitUntil(t, 3*time.Minute, "make run to serve", func() bool {
		if _, err := os.Stat(filepath.Join(dir, "dev.env")); err != nil {
			return false // not this make run's server yet
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	token := devEnv(t, filepath.Join(dir, "dev.env"), "ADMIN_TOKEN")
	if token == "" || !strings.Contains(out.String(), token) {
		t.Fatalf("dev.env has no ADMIN_TOKEN, or the banner does not show it:\n%s", out)
	}
	if got := devEnv(t, filepath.Join(dir, "dev.env"), "DATABASE_URL"); got != url {
		t.Fatalf("dev.env DATABASE_URL %q, want %q", got, url)
	}
	adminWorks := func() error {
		r, err := gqlTo("http://"+addr, token, `{ inventoryHealth { heldReservations } }`, nil)
		if err != nil {
			return err
		}
		if len(r.Errors) > 0 {
			return fmt.Errorf("%+v", r.Errors)
		}
		return nil
	}
	if err := adminWorks(); err != nil {
		t.Fatalf("the admin key make run printed: %v", err)
	}
	t.Logf("make run:\n%s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, "bash", repo("scripts/run.sh"))
	second.Env = append(os.Environ(), "DATABASE_URL="+url, "LISTEN_ADDR="+addr, "INVENTORY_DEV_DIR="+dir)
	started := time.Now()
	secondOut, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(secondOut), "is in use") {
		t.Fatalf("second make run: %v\n%s", err, secondOut)
	}
	if took := time.Since(started); took > 5*time.Second {
		t.Fatalf("the second make run took %s to fail", took)
	}
	if err := adminWorks(); err != nil {
		t.Fatalf("after a second make run the first one's key no longer works: %v", err)
	}
	if got := devEnv(t, filepath.Join(dir, "dev.env"), "ADMIN_TOKEN"); got != token {
		t.Fatal("the second make run changed dev.env")
	}

	// make stop stops this make run's server and leaves DATABASE_URL's
	// PostgreSQL alone.
	stop := exec.CommandContext(ctx, "bash", repo("scripts/stop.sh"))
	stop.Env = append(os.Environ(), "DATABASE_URL="+url, "INVENTORY_DEV_DIR="+dir)
	stopOut, err := stop.CombinedOutput()
	if err != nil || !strings.Contains(string(stopOut), "stopped the server make run started") ||
		strings.Contains(string(stopOut), "stopped PostgreSQL") || !strings.Contains(string(stopOut), "DATABASE_URL is not make run's own: left running") {
		t.Fatalf("make stop: %v\n%s", err, stopOut)
	}
	if _, err := http.Get("http://" + addr + "/readyz"); err == nil {
		t.Fatal("make stop said it stopped the server, which still answers")
	}
	if n := tablesIn(t, url); n == 0 {
		t.Fatal("DATABASE_URL's database has no tables after make stop")
	}

	// A DATABASE_URL that does not answer is an error, not another database.
	bad := exec.CommandContext(ctx, "bash", repo("scripts/run.sh"))
	bad.Env = append(os.Environ(), "DATABASE_URL=postgres://nobody:secret@127.0.0.1:1/none", "LISTEN_ADDR=127.0.0.1:0", "INVENTORY_DEV_DIR="+t.TempDir())
	badOut, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(badOut), "does not answer") || strings.Contains(string(badOut), "secret") {
		t.Fatalf("make run with a dead DATABASE_URL: %v\n%s", err, badOut)
	}
}
