package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestLongAcceptHeaderCostsWhatAnyLongHeaderCosts: on the real binary, an
// anonymous GET whose Accept header is 900 KB of media ranges (net/http
// admits headers up to 1 MB) costs the server about what the same GET costs
// with those 900 KB in a header nobody reads, within 3×: content
// negotiation reads the first 32 ranges (api.maxAcceptRanges), not every
// one, twice a request.
func TestLongAcceptHeaderCostsWhatAnyLongHeaderCosts(t *testing.T) {
	t.Parallel()
	s := setupBinary(t, map[string]string{"INVENTORY_RATE_LIMIT_ANONYMOUS_READS": "0"})
	s.seed("HP", 5)
	target := s.url + "/graphql?" + url.Values{"query": {`{ availability(skus: ["HP"]) { sku available } }`}}.Encode()
	long := strings.Repeat("text/plain;q=0.5,", (900<<10)/17)

	// spend sends n GETs from 4 clients with the header set and returns the
	// server's CPU time they took, in clock ticks.
	spend := func(header, value string, n int) int64 {
		t.Helper()
		before := processCPUTicks(t, s.pid)
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				for range n / 4 {
					req, _ := http.NewRequest(http.MethodGet, target, nil)
					req.Header.Set(header, value)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Errorf("client %d: %v", c, err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					// Every range of the header but the first 32 is
					// ignored: none of them accepts a JSON answer, so the
					// answer is 406 whether 32 or all are read.
					if want := http.StatusOK; header == "Accept" {
						if resp.StatusCode != http.StatusNotAcceptable {
							t.Errorf("900 KB of text/plain in Accept: %d %.200s", resp.StatusCode, b)
						}
					} else if resp.StatusCode != want {
						t.Errorf("GET: %d %.200s", resp.StatusCode, b)
					}
				}
			})
		}
		wg.Wait()
		return processCPUTicks(t, s.pid) - before
	}
	spend("X-Padding", long, 20) // warm up
	const n = 200
	padding := spend("X-Padding", long, n)
	accept := spend("Accept", long, n)
	t.Logf("%d GETs with 900 KB of media ranges: %d ticks of server CPU in Accept, %d in an unread header", n, accept, padding)
	// Reading every range cost 5.7× (577 ticks against 102); the first 32,
	// 1.75× (212 against 121: the header is still scanned whole for
	// text/event-stream by the SSE checks).
	if accept > 3*padding+20 {
		t.Fatalf("900 KB of media ranges in Accept cost the server %d ticks of CPU for %d GETs, against %d in an unread header", accept, n, padding)
	}
}

// processCPUTicks is the user and system CPU time of process pid so far,
// in clock ticks (/proc/PID/stat fields 14 and 15).
func processCPUTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count after it.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return utime + stime
}
