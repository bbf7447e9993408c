package faults

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// cluster is a PostgreSQL cluster of the test's own, made with initdb in a
// fresh temporary directory: the only kind of PostgreSQL the harness ever
// stops or restarts. As root it runs as the postgres OS user (initdb refuses
// root), like scripts/pgup.sh. The postmaster runs as a child of the test
// process (SIGQUIT, an immediate shutdown, if the test process dies), so an
// interrupted run leaves no cluster behind; the fault itself is pg_ctl's.
type cluster struct {
	t      *testing.T
	bindir string
	base   string // owned by the cluster's user: data/, the log, the socket
	owner  string // "" when it runs as the current user
	cred   *syscall.Credential
	port   int

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{}
}

// findInitdb finds initdb on PATH or in Debian's versioned directories,
// newest first.
func findInitdb() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// Debian's /usr/local/bin/initdb may be a link into
		// /usr/lib/postgresql/N/bin, where the other binaries are.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real, nil
		}
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int {
		va, vb := versionOf(a), versionOf(b)
		return vb - va
	})
	if len(found) == 0 {
		return "", fmt.Errorf("initdb not found on PATH or under /usr/lib/postgresql/*/bin: install PostgreSQL 15+ (Debian: apt-get install postgresql)")
	}
	return found[0], nil
}

func versionOf(initdb string) int {
	var v int
	_, _ = fmt.Sscanf(filepath.Base(filepath.Dir(filepath.Dir(initdb))), "%d", &v)
	return v
}

// newCluster runs initdb and starts the cluster on a free loopback port;
// it is stopped (immediate) and its directory removed at cleanup.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	initdb, err := findInitdb()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", "inventory-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, bindir: filepath.Dir(initdb), base: base}
	t.Cleanup(func() {
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove %s: %v", base, err)
		}
	})
	if os.Geteuid() == 0 {
		c.owner = "postgres"
		if _, err := user.Lookup(c.owner); err != nil {
			if out, err := exec.Command("useradd", "--system", "--no-create-home", c.owner).CombinedOutput(); err != nil {
				t.Fatalf("useradd postgres: %v %s", err, out)
			}
		}
		u, err := user.Lookup(c.owner)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(base, int(uid), int(gid)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.as(filepath.Join(c.bindir, "initdb"), "-D", c.data(), "-U", "inventory", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.startOnFreePort(t, "cluster")
	return c
}

// startOnFreePort starts the postmaster on a free port (trying another if
// that one was taken meanwhile), killed at cleanup, with its log shown if
// the test failed.
func (c *cluster) startOnFreePort(t *testing.T, what string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		c.port = freePort(t)
		err := c.start()
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		c.kill()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(c.base, "server.log"))
			t.Logf("PostgreSQL log of the test's %s:\n%s", what, log)
		}
	})
}

func (c *cluster) data() string { return filepath.Join(c.base, "data") }

// as runs a command as the cluster's user.
func (c *cluster) as(name string, args ...string) (string, error) {
	if c.owner != "" {
		args = append([]string{"-u", c.owner, "--", name}, args...)
		name = "runuser"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.base
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// start starts the postmaster and waits until it accepts connections.
func (c *cluster) start() error {
	logf, err := os.OpenFile(filepath.Join(c.base, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(c.bindir, "postgres"), "-D", c.data(), "-p", strconv.Itoa(c.port), "-k", c.base,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200")
	cmd.Dir = c.base
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGQUIT, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.mu.Lock()
	c.proc, c.exited = cmd, exited
	c.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(c.base, "server.log"))
			return fmt.Errorf("postgres exited at start: %s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.kill()
			return fmt.Errorf("postgres did not accept connections within 60s: %v", err)
		}
	}
}

// kill shuts the postmaster down immediately (SIGQUIT) if it runs, and
// waits for it.
func (c *cluster) kill() {
	c.mu.Lock()
	proc, exited := c.proc, c.exited
	c.mu.Unlock()
	if proc == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = proc.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = proc.Process.Kill()
		<-exited
	}
}

// stop shuts the cluster down with pg_ctl in fast mode (sessions are
// ended, nothing committed is lost) and waits for the postmaster to exit.
func (c *cluster) stop() {
	c.t.Helper()
	if out, err := c.as(filepath.Join(c.bindir, "pg_ctl"), "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
		c.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
	c.mu.Lock()
	exited := c.exited
	c.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		c.t.Fatal("postmaster still running after pg_ctl stop")
	}
}

func (c *cluster) url(db string) string {
	return fmt.Sprintf("postgres://inventory@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// createDatabase makes an empty database on the cluster and returns its URL.
func (c *cluster) createDatabase(name string) string {
	c.t.Helper()
	conn, err := pgx.Connect(context.Background(), c.url("postgres"))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		c.t.Fatal(err)
	}
	return c.url(name)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newStandby makes a hot standby of c with pg_basebackup -R (streaming
// replication; initdb's pg_hba.conf lets 127.0.0.1 replicate) and starts it
// on a port of its own; like c, it is the test's own and removed at cleanup.
func (c *cluster) newStandby(t *testing.T) *cluster {
	t.Helper()
	base, err := os.MkdirTemp("", "inventory-faults-standby-")
	if err != nil {
		t.Fatal(err)
	}
	s := &cluster{t: t, bindir: c.bindir, base: base, owner: c.owner, cred: c.cred}
	t.Cleanup(func() {
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove %s: %v", base, err)
		}
	})
	if c.cred != nil {
		if err := os.Chown(base, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := s.as(filepath.Join(c.bindir, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "inventory",
		"-D", s.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	s.startOnFreePort(t, "standby")
	return s
}
