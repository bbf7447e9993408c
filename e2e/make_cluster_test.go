package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// freePorts finds n consecutive loopback ports nothing listens on, from
// from on.
func freePorts(t *testing.T, from, n int) int {
	t.Helper()
	for base := from; base < 60000; base += n {
		free := true
		for p := base; p < base+n; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestMakeClusterStartsAndStops runs scripts/cluster.sh (make cluster) in a
// directory and on ports of its own: a primary, a pg_basebackup standby,
// PgBouncer in transaction mode and three instances come up ready; a SKU
// created through one instance is reserved through another and its
// availability read on the third (through PgBouncer, the copy loaded from
// the standby); Ctrl-C (SIGINT to the process group, as a terminal sends)
// stops all of it.
func TestMakeClusterStartsAndStops(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "inventory-make-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	// The clusters' owner (postgres, as root) must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Below the ephemeral range (see scripts/cluster.sh), clear of the
	// cluster.sh (30000-31499), test-topology (31500-31799) and bench
	// (31900-) defaults.
	dbPorts := freePorts(t, 31800+os.Getpid()%30*3, 3)
	httpPort := freePorts(t, dbPorts+3, 3)
	env := append(os.Environ(), "INVENTORY_CLUSTER_DIR="+filepath.Join(dir, "cluster"),
		fmt.Sprintf("INVENTORY_CLUSTER_PORT=%d", dbPorts), fmt.Sprintf("INVENTORY_CLUSTER_HTTP_PORT=%d", httpPort))
	cmd := exec.Command("bash", repo("scripts/cluster.sh"))
	cmd.Env = env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		stop := exec.Command("bash", repo("scripts/cluster.sh"), "stop")
		stop.Env = env
		_ = stop.Run()
		_ = os.RemoveAll(dir)
	})

	waitUntil(t, 3*time.Minute, "make cluster to say it is up", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("make cluster exited before it was up: %v\n%s", err, out.String())
		default:
		}
		return strings.Contains(out.String(), "make cluster is up")
	})
	m := regexp.MustCompile(`admin token (\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no admin token in:\n%s", out.String())
	}
	admin := m[1]
	urls := make([]string, 3)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d", httpPort+i)
		if code, body := httpGet(t, urls[i]+"/readyz"); code != 200 {
			t.Fatalf("instance %d /readyz %d %s", i, code, body)
		}
	}
	for _, q := range []string{
		`mutation { createLocation(input: {code: "AMS", name: "Amsterdam", priority: 1}) { userErrors { code } } }`,
		`mutation { createSku(input: {code: "CL-1", name: "Thing", kind: QUANTITY}) { userErrors { code } } }`,
		`mutation { receiveStock(input: {sku: "CL-1", location: "AMS", quantity: 5, reference: "PO-1"}) { userErrors { code } } }`,
	} {
		if r, err := gqlTo(urls[0], admin, q, nil); err != nil || r.Status != 200 || len(r.Errors) > 0 {
			t.Fatalf("%s on instance 0: %v %+v", q, err, r)
		}
	}
	r, err := gqlTo(urls[1], admin, reserveMutation, reserveVars("cart-1", "k1", "CL-1", 2))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := decodeReserve(r); err != nil || p.Reservation == nil {
		t.Fatalf("reserve on instance 1: %+v %v", p, err)
	}
	waitUntil(t, 10*time.Second, "instance 2 to show 3 available", func() bool {
		r, err := gqlTo(urls[2], "", `{ availability(skus: ["CL-1"]) { available } }`, nil)
		return err == nil && strings.Contains(string(r.Data["availability"]), `"available":3`)
	})

	// Ctrl-C.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("make cluster after Ctrl-C: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("make cluster still running a minute after Ctrl-C:\n%s", out.String())
	}
	for p := dbPorts; p < dbPorts+3; p++ {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second); err == nil {
			c.Close()
			t.Errorf("port %d still listening after Ctrl-C", p)
		}
	}
	for _, u := range urls {
		if c, err := net.DialTimeout("tcp", strings.TrimPrefix(u, "http://"), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listening after Ctrl-C", u)
		}
	}
}
