package main

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// sqlFiles are the baseline statements: what our reserve, code claim and
// availability read boil down to in SQL, with nothing around them.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// writeSQLFiles copies the scripts to dir for pgbench -f.
func writeSQLFiles(dir string) error {
	entries, err := sqlFiles.ReadDir("sql")
	if err != nil {
		return fmt.Errorf("read embedded sql: %w", err)
	}
	for _, e := range entries {
		b, err := sqlFiles.ReadFile("sql/" + e.Name())
		if err != nil {
			return fmt.Errorf("read %s: %w", e.Name(), err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", e.Name(), err)
		}
	}
	return nil
}

var tpsRE = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// runPgbench runs one baseline cell and reads p50/p99 from pgbench's
// per-transaction log (--log), which costs one line per transaction on
// disk and is parsed after the run, not during it.
func runPgbench(ctx context.Context, dbURL, dir, script string, clients int, d time.Duration, c catalog) (loadResult, error) {
	logDir, err := os.MkdirTemp(dir, "pgblog-")
	if err != nil {
		return loadResult{}, fmt.Errorf("pgbench log dir: %w", err)
	}
	defer os.RemoveAll(logDir)
	secs := max(1, int(d.Round(time.Second)/time.Second))
	args := []string{"-n", "-M", "prepared", "-T", strconv.Itoa(secs), "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(2, clients)),
		"--log", "--log-prefix=" + filepath.Join(logDir, "tx"),
		"-D", fmt.Sprintf("minsku=%d", c.pgMinSKU), "-D", fmt.Sprintf("maxsku=%d", c.pgMaxSKU),
		"-D", fmt.Sprintf("hotsku=%d", c.pgHotSKU), "-D", fmt.Sprintf("codesku=%d", c.pgCodesSKU),
		"-D", fmt.Sprintf("codeline=%d", c.pgCodesLine), "-D", fmt.Sprintf("loc=%d", c.loc),
		"-f", filepath.Join(dir, script), dbURL}
	cmd := exec.CommandContext(ctx, "pgbench", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return loadResult{}, fmt.Errorf("pgbench %s -c %d: %w: %s", script, clients, err, tail(out.String(), 800))
	}
	m := tpsRE.FindStringSubmatch(out.String())
	if m == nil {
		return loadResult{}, fmt.Errorf("pgbench %s: no tps in output: %s", script, tail(out.String(), 800))
	}
	tps, _ := strconv.ParseFloat(m[1], 64)
	res := loadResult{elapsed: time.Duration(secs) * time.Second}
	res.ok = int(tps * float64(secs))
	files, _ := filepath.Glob(filepath.Join(logDir, "tx*"))
	for _, f := range files {
		if err := readPgbenchLog(f, &res.lat); err != nil {
			return res, err
		}
	}
	if fm := failedRE.FindStringSubmatch(out.String()); fm != nil {
		res.failed, _ = strconv.Atoi(fm[1])
	}
	return res, nil
}

var failedRE = regexp.MustCompile(`number of failed transactions: ([0-9]+)`)

// readPgbenchLog adds each logged transaction's latency (third field, µs).
func readPgbenchLog(path string, h *histogram) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pgbench log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		us, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			continue
		}
		h.record(time.Duration(us) * time.Microsecond)
	}
	return sc.Err()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
