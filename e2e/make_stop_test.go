package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCtlStop stops the cluster in dir with pg_ctl, as its owner (postgres when
// the tests run as root): the cleanup of a test that made one, which must not
// depend on the make stop under test.
func pgCtlStop(dir string) {
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
		return
	}
	pgCtl, err := exec.LookPath("pg_ctl")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
		if len(matches) == 0 {
			return
		}
		pgCtl = matches[len(matches)-1]
	}
	args := []string{pgCtl, "-D", dir, "stop", "-m", "immediate", "-w"}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	_ = exec.Command(args[0], args[1:]...).Run()
}

// pgAnswers: does a PostgreSQL answer on 127.0.0.1:port (pg_isready)?
func pgAnswers(port string) bool {
	return exec.Command("pg_isready", "-q", "-h", "127.0.0.1", "-p", port, "-t", "3").Run() == nil
}

// TestMakeRunStop: make run where DATABASE_URL is not set makes a private
// PostgreSQL in its dev directory and says so in one line (initdb's and
// pg_ctl's output go to pg.log there), and its banner says that PostgreSQL
// keeps running and that make stop stops it. make stop stops the server and
// that cluster (no postmaster.pid, pg_isready gets no answer) and says what
// it stopped; a second make stop finds nothing running. It never touches a
// PostgreSQL it did not create: not the one of the environment's
// DATABASE_URL, and not a cluster in the private directory without the
// marker pgup.sh leaves in what it made.
func TestMakeRunStop(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "inventory-make-stop-")
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's owner (postgres, as root) must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pgDir := filepath.Join(dir, "pg")
	t.Cleanup(func() {
		pgCtlStop(pgDir)
		_ = os.RemoveAll(dir)
	})
	_, pgPort, _ := net.SplitHostPort(freeAddr(t))
	addr := freeAddr(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "INVENTORY_DEV_DIR=") && !strings.HasPrefix(kv, "INVENTORY_PG_PORT=") {
			env = append(env, kv)
		}
	}
	env = append(env, "INVENTORY_DEV_DIR="+dir, "INVENTORY_PG_PORT="+pgPort, "LISTEN_ADDR="+addr, "INVENTORY_LOG_LEVEL=warn")
	script := func(name string, extraEnv ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", repo("scripts", name))
		cmd.Env = append(slices.Clone(env), extraEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	run := exec.Command("bash", repo("scripts/run.sh"))
	run.Env = env
	out := &syncBuffer{}
	run.Stdout, run.Stderr = out, out
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// exited closes when make run has ended (runErr then says how).
	exited := make(chan struct{})
	var runErr error
	go func() { runErr = run.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	waitUntil(t, 3*time.Minute, "make run to serve", func() bool {
		select {
		case <-exited:
			t.Fatalf("make run ended: %v\n%s", runErr, out)
		default:
		}
		if _, err := os.Stat(filepath.Join(dir, "dev.env")); err != nil {
			return false
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	banner := out.String()
	t.Logf("make run:\n%s", banner)
	for _, noise := range []string{"initdb", "pg_ctl", "You can now start the database server", "Success.", "The files belonging to this database system",
		"waiting for server to start", "server started", "created database"} {
		if strings.Contains(banner, noise) {
			t.Errorf("make run's output has %q (initdb's or pg_ctl's; they belong in pg.log)", noise)
		}
	}
	if before, _, _ := strings.Cut(banner, "Inventory server:"); strings.Count(before, "\n") > 6 {
		t.Errorf("make run prints %d lines before its banner, want at most 6", strings.Count(before, "\n"))
	}
	for _, want := range []string{"pgup: made a private PostgreSQL in " + pgDir + " and started it on 127.0.0.1:" + pgPort,
		"PostgreSQL (private, " + pgDir + ") keeps running: make stop stops it", "Ctrl-C stops the server"} {
		if !strings.Contains(banner, want) {
			t.Errorf("make run does not say %q", want)
		}
	}
	if setup, err := os.ReadFile(filepath.Join(dir, "pg.log")); err != nil || !strings.Contains(string(setup), "The files belonging to this database system") ||
		!strings.Contains(string(setup), "server started") {
		t.Errorf("pg.log has not initdb's and pg_ctl's output: %v\n%s", err, setup)
	}
	privateURL := devEnv(t, filepath.Join(dir, "dev.env"), "DATABASE_URL")
	if want := "@127.0.0.1:" + pgPort + "/"; !strings.Contains(privateURL, want) {
		t.Fatalf("dev.env DATABASE_URL %q is not the private cluster's (%s)", privateURL, want)
	}
	if !pgAnswers(pgPort) {
		t.Fatal("the private cluster does not answer while make run serves")
	}

	stopped, err := script("stop.sh")
	t.Logf("make stop:\n%s", stopped)
	if err != nil || !strings.Contains(stopped, "stopped the server make run started") ||
		!strings.Contains(stopped, "stopped PostgreSQL (private, "+pgDir+", 127.0.0.1:"+pgPort+")") {
		t.Fatalf("make stop: %v\n%s", err, stopped)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("make run still runs 30 s after make stop")
	}
	if _, err := os.Stat(filepath.Join(pgDir, "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after make stop the cluster still has a postmaster.pid: %v", err)
	}
	if pgAnswers(pgPort) {
		t.Error("after make stop the private cluster still answers")
	}
	if url := os.Getenv("DATABASE_URL"); url != "" {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatalf("after make stop the tests' own PostgreSQL (DATABASE_URL) does not answer: %v", err)
		}
		conn.Close(context.Background())
	}
	if again, err := script("stop.sh"); err != nil || !strings.Contains(again, "is not running") || strings.Contains(again, "stopped") {
		t.Errorf("a second make stop: %v\n%s", err, again)
	}

	// A shell that loaded dev.env (DATABASE_URL: the stopped private
	// cluster) gets it started again by make run, make test (pgup.sh).
	if up, err := script("pgup.sh", "DATABASE_URL="+privateURL); err != nil || !strings.Contains(up, "started the private PostgreSQL in "+pgDir) ||
		strings.TrimSpace(up[strings.LastIndex(strings.TrimSpace(up), "\n")+1:]) != privateURL {
		t.Fatalf("pgup.sh with dev.env's DATABASE_URL after make stop: %v\n%s", err, up)
	}
	if !pgAnswers(pgPort) {
		t.Fatal("pgup.sh said it started the private cluster, which does not answer")
	}

	// A cluster in the private directory that pgup.sh did not make (here:
	// its marker removed) is left running.
	if err := os.Remove(filepath.Join(pgDir, "inventory-pgup")); err != nil {
		t.Fatal(err)
	}
	foreign, err := script("stop.sh")
	if err != nil || !strings.Contains(foreign, "make run did not create") || strings.Contains(foreign, "stopped") {
		t.Errorf("make stop with a cluster it did not create: %v\n%s", err, foreign)
	}
	if !pgAnswers(pgPort) {
		t.Error("make stop stopped a cluster it did not create")
	}
}
