package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverEnv is the environment the server binary and its CLI commands run
// with: the bench database, fresh secrets, a loopback port and a pool sized
// for the largest client count.
func serverEnv(dbURL string, maxConns int, pprofAddr string) []string {
	secret := make([]byte, 32)
	codesKey := make([]byte, 32)
	hmacKey := make([]byte, 32)
	_, _ = rand.Read(secret)
	_, _ = rand.Read(codesKey)
	_, _ = rand.Read(hmacKey)
	env := []string{}
	for _, kv := range os.Environ() {
		// DATABASE_DIRECT_URL and DATABASE_REPLICA_URL too: a server of the
		// bench's must not reach a database the caller's environment names.
		// OTEL_* too: tracing is off unless a row turns it on (tracing.go).
		if !strings.HasPrefix(kv, "INVENTORY_") && !strings.HasPrefix(kv, "DATABASE_") && !strings.HasPrefix(kv, "LISTEN_ADDR=") &&
			!strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"DATABASE_URL="+dbURL,
		"LISTEN_ADDR=127.0.0.1:0",
		"INVENTORY_TOKEN_SECRET="+hex.EncodeToString(secret),
		"INVENTORY_CODES_KEY=bench:"+base64.StdEncoding.EncodeToString(codesKey),
		"INVENTORY_CODES_HMAC_KEY="+base64.StdEncoding.EncodeToString(hmacKey),
		"INVENTORY_DB_MAX_CONNS="+strconv.Itoa(maxConns),
		"INVENTORY_LOG_LEVEL=warn",
		// The load comes from one address and a few keys at rates far past
		// what one shopper or browser sends: the budgets stay on (their cost
		// is measured) but out of reach.
		"INVENTORY_RATE_LIMIT_ANONYMOUS_READS=1000000000",
		"INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES=1000000000",
		"INVENTORY_RATE_LIMIT_CHECKOUT_READS=1000000000",
		"INVENTORY_RATE_LIMIT_CHECKOUT_WRITES=1000000000",
		// The fan-out's subscribers all use the admin key.
		"INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER=1000000",
		// The viewers row's anonymous sockets come from a few loopback
		// addresses (viewersPerAddress each); a server without these
		// settings ignores them.
		"INVENTORY_ANONYMOUS_MAX_SOCKETS=1000000",
		"INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS=1000000",
		// Off unless -pprof: go tool pprof http://ADDR/debug/pprof/profile.
		"INVENTORY_PPROF_ADDR="+pprofAddr,
	)
}

// cli runs one bin/inventory command and returns its stdout.
func cli(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("inventory %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// createKey makes an admin or service key and returns its secret, which
// the CLI prints alone on its last line.
func createKey(ctx context.Context, bin string, env []string, role, name string) (string, error) {
	out, err := cli(ctx, bin, env, "token", "create", "--role", role, "--name", name)
	if err != nil {
		return "", err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// serverProc is the real server binary running as a child process, so the
// bench measures what production runs: HTTP, GraphQL, pool, River and relay.
type serverProc struct {
	cmd  *exec.Cmd
	URL  string
	done chan error
}

// startServer runs "bin serve" and waits until it prints its URL. The
// server's log goes to logPath for post-mortems.
func startServer(ctx context.Context, bin string, env []string, logPath string) (*serverProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	// If the bench dies without running its deferred stop, the server gets
	// SIGTERM instead of living on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("server stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	p := &serverProc{cmd: cmd, done: make(chan error, 1)}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "serving on "); ok {
				urlc <- strings.Fields(rest)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		p.done <- cmd.Wait()
		logf.Close()
	}()
	select {
	case p.URL = <-urlc:
		return p, nil
	case err := <-p.done:
		return nil, fmt.Errorf("server exited before serving (see %s): %w", logPath, err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("server did not start within 60s (see %s)", logPath)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

// stop sends SIGTERM, lets the server shut down gracefully and kills it if
// it has not exited in 30 s.
func (p *serverProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("server exit: %w", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("server did not stop within 30s of SIGTERM; killed")
	}
}

// rssSampler records the server's peak resident set while a cell runs, from
// /proc/<pid>/status every 100 ms (VmHWM would hold the peak since start,
// not per cell).
type rssSampler struct {
	pid  int
	stop chan struct{}
	wg   sync.WaitGroup
	peak int64 // kB
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{})}
	s.peak = readRSS(pid)
	s.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.peak = max(s.peak, readRSS(s.pid))
			}
		}
	})
	return s
}

// done stops sampling and returns the peak in MB.
func (s *rssSampler) done() float64 {
	close(s.stop)
	s.wg.Wait()
	s.peak = max(s.peak, readRSS(s.pid))
	return float64(s.peak) / 1024
}

func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
