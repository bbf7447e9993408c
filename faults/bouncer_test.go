package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// bouncer is a PgBouncer of the test's own in transaction mode in front of
// one of its clusters (Debian's pgbouncer package; make test installs it):
// the only PgBouncer the harness ever stops or restarts.
type bouncer struct {
	t       *testing.T
	primary *cluster
	dir     string
	port    int
	proc    *exec.Cmd
	exited  chan struct{}
}

// newBouncer starts PgBouncer in front of primary with at most conns server
// connections; it is stopped at cleanup.
func newBouncer(t *testing.T, primary *cluster, conns int) *bouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatal("pgbouncer not found: make test installs it (Debian: apt-get install pgbouncer)")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	dir := filepath.Join(primary.base, "pgbouncer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &bouncer{t: t, primary: primary, dir: dir, port: freePort(t)}
	files := map[string]string{
		"userlist.txt": `"inventory" ""` + "\n",
		"pgbouncer.ini": fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = %d
max_db_connections = %d
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s/pgbouncer.log
`, primary.port, b.port, dir, conns, conns, dir),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if primary.cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "userlist.txt"), filepath.Join(dir, "pgbouncer.ini")} {
			if err := os.Chown(p, int(primary.cred.Uid), int(primary.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.start(bin)
	t.Cleanup(b.stop)
	return b
}

func (b *bouncer) start(bin string) {
	b.t.Helper()
	cmd := exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.Dir = b.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: b.primary.cred}
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start pgbouncer: %v", err)
	}
	b.proc, b.exited = cmd, make(chan struct{})
	exited := b.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if _, ok := waitFor(10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, b.url("postgres"))
		if err != nil {
			return false
		}
		conn.Close(ctx)
		return true
	}); !ok {
		log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
		b.t.Fatalf("pgbouncer did not answer within 10s:\n%s", log)
	}
}

// stop ends PgBouncer at once (SIGINT would wait for clients: SIGTERM is
// its immediate shutdown), dropping every client and server connection.
func (b *bouncer) stop() {
	if b.proc == nil {
		return
	}
	select {
	case <-b.exited:
		return
	default:
	}
	_ = b.proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.proc.Process.Kill()
		<-b.exited
	}
}

// restart stops PgBouncer and starts it again on the same port.
func (b *bouncer) restart() {
	b.t.Helper()
	b.stop()
	b.start(b.proc.Path)
}

func (b *bouncer) url(db string) string {
	return "postgres://inventory@127.0.0.1:" + strconv.Itoa(b.port) + "/" + db + "?sslmode=disable"
}

// pooledEnv is an instance's database settings through b: requests through
// PgBouncer, sessions direct to the primary, and the role's timeouts as
// its defaults (the server cannot send them through PgBouncer).
func (b *bouncer) pooledEnv(db string) map[string]string {
	b.t.Helper()
	conn, err := pgx.Connect(context.Background(), b.primary.url(db))
	if err != nil {
		b.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, set := range []string{"statement_timeout = '30s'", "lock_timeout = '10s'", "jit = off"} {
		if _, err := conn.Exec(context.Background(), "ALTER ROLE inventory SET "+set); err != nil {
			b.t.Fatal(err)
		}
	}
	return map[string]string{
		"DATABASE_URL":        b.url(db),
		"DATABASE_DIRECT_URL": b.primary.url(db),
		"INVENTORY_DB_POOLER": "transaction",
	}
}
