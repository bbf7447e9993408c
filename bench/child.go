package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// The bench's baselines over HTTP (the ceiling, ceiling.go, and the naive
// server, naive.go) are this binary run again as a child process, like the
// real server: their own process, so their CPU is theirs (/proc) and the
// load generator reaches them over loopback exactly as it reaches ours.
// The parent sends the child its configuration as one JSON value on stdin,
// the child prints "serving on URL" as its first line of stdout, and it
// serves until its stdin closes (the parent is done, or died).

// childProc is a running child server.
type childProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startChild runs this executable with flag (e.g. "-naive-serve"), sends
// it config and waits for the URL it serves on. The test binary serves the
// same flags from TestMain, so tests start children the same way.
func startChild(name, flag string, config any) (*childProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(self, flag)
	// If the bench dies without stopping it, the child gets SIGTERM.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &childProc{name: name, cmd: cmd, stdin: stdin}
	if err := json.NewEncoder(stdin).Encode(config); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s: send the configuration: %w", name, err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "serving on ")
	if err != nil || !ok {
		p.stop()
		return nil, fmt.Errorf("%s: did not start: %q %v", name, line, err)
	}
	p.url = url
	return p, nil
}

// pid is the child's process id, for its CPU in /proc.
func (p *childProc) pid() int { return p.cmd.Process.Pid }

// stop closes the child's stdin, which ends it, and waits for it; a child
// that has not exited after 10 s is killed.
func (p *childProc) stop() {
	_ = p.stdin.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// readChildConfig is the child's side of startChild's first step: the one
// JSON value the parent sends on stdin.
func readChildConfig(name string, stdin io.Reader, config any) error {
	if err := json.NewDecoder(stdin).Decode(config); err != nil {
		return fmt.Errorf("%s: read the configuration: %w", name, err)
	}
	return nil
}

// serveChild is the child's side of the rest: it listens on a loopback
// port, prints "serving on URL" and serves h until stdin closes.
func serveChild(name string, stdin io.Reader, h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("%s: listen: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("serving on http://%s\n", ln.Addr())
	go func() {
		// The parent closes stdin (or dies) when it is done.
		_, _ = io.Copy(io.Discard, stdin)
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// childRoles are the flags that make this binary a child server, and what
// each then runs: main parses them as flags, TestMain looks for them as the
// first argument.
var childRoles = map[string]func() error{
	"-ceiling-serve": serveCeiling,
	"-naive-serve":   serveNaive,
}
