package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"inventory/pgtest"
	"inventory/testkit"
)

// serverBinary is the inventory binary, built once per test process
// (testkit.ServerBinary). Tests that need it are the memory attacks: their
// figure is the server process's own peak resident set, which no other
// parallel test inflates.
func serverBinary(t *testing.T) string { return testkit.ServerBinary(t) }

// binServer is the real binary (`inventory serve`) as a child process on a
// database of its own. Its embedded testServer's url points at the child, so
// gql, seed, count and the CLI (run in-process against the same database)
// work as with setup.
type binServer struct {
	*testServer
	pid int
}

// setupBinary starts `inventory serve` with the test environment plus
// overrides, creates an admin and a service key, and stops the process
// (SIGTERM) at cleanup.
func setupBinary(t *testing.T, overrides map[string]string) *binServer {
	t.Helper()
	bin := serverBinary(t)
	dbURL := pgtest.NewDatabase(t)
	env := map[string]string{
		"LISTEN_ADDR":              "127.0.0.1:0",
		"INVENTORY_TOKEN_SECRET":   strings.Repeat("t", 32),
		"INVENTORY_CODES_KEY":      "k1:" + testCodesKey,
		"INVENTORY_CODES_HMAC_KEY": testHMACKey,
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

	cmd := exec.Command(bin, "serve")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	ts := &testServer{t: t, env: env, db: db}
	cmd.Stderr = &ts.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "serving on "); ok {
				urlc <- strings.Fields(rest)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("server did not stop within 20 s of SIGTERM")
		}
	})
	select {
	case ts.url = <-urlc:
	case err := <-done:
		t.Fatalf("server exited before serving: %v\n%s", err, ts.logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("server did not start within 60 s\n%s", ts.logs.String())
	}
	waitReady(t, ts.url) // as setup does, and for the same reason
	ts.admin = ts.cli("token", "create", "--role", "admin", "--name", "test-admin")
	ts.service = ts.cli("token", "create", "--role", "service", "--name", "test-service")
	return &binServer{testServer: ts, pid: cmd.Process.Pid}
}

// rss is the process's resident set now (VmRSS) in bytes.
func (s *binServer) rss() int64 { return procStatusBytes(s.pid, "VmRSS:") }

// peakRSS is the process's peak resident set since it started (VmHWM) in
// bytes.
func (s *binServer) peakRSS() int64 { return procStatusBytes(s.pid, "VmHWM:") }

func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10 // kB
			}
		}
	}
	return 0
}

func TestMain(m *testing.M) { os.Exit(testkit.RunWithBinary(m)) }
