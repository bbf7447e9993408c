package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// tracingResult is the tracing row: the same reserves (checkout token, 1 of
// 10,000 SKUs) against the bench's server, tracing off, and against a
// second instance of the same binary on the same database that traces
// every request (OTEL_TRACES_SAMPLER=always_on) and exports to a local
// OTLP/HTTP endpoint (otlpSink), the two cells side by side at each client
// count.
type tracingResult struct {
	cells                     []tracingCell
	spans, exports, kilobytes int64 // what the sink received
}

type tracingCell struct {
	clients int
	off, on loadResult
	// base is the same cell against -tracing-base-bin (a binary from
	// before tracing, say), tracing off; zero without it.
	base loadResult
}

// runTracing runs the row at each client count, on a database of its own:
// the traced instance must start before anything but real codes is stored
// (the bench's pgbench codes would fail its start-up key check).
func runTracing(ctx context.Context, o options, clients []int) (tracingResult, error) {
	most := 0
	for _, n := range clients {
		most = max(most, n)
	}
	b, cleanup, err := setUp(ctx, o, "tracing", most+8, most)
	if err != nil {
		return tracingResult{}, err
	}
	defer cleanup()
	sink, err := startOTLPSink()
	if err != nil {
		return tracingResult{}, err
	}
	defer sink.close()
	env := setEnv(b.env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.url, "OTEL_SERVICE_NAME=inventory-bench", "OTEL_TRACES_SAMPLER=always_on")
	srv, err := startServer(ctx, o.bin, env, filepath.Join(o.out, "traced-server.log"))
	if err != nil {
		return tracingResult{}, err
	}
	defer func() { _ = srv.stop() }()
	if err := b.waitStartupReconcile(ctx); err != nil {
		return tracingResult{}, err
	}
	traced := newGQLClient(srv.URL, most+8)
	var base *gqlClient
	if o.tracingBaseBin != "" {
		bsrv, err := startServer(ctx, o.tracingBaseBin, b.env, filepath.Join(o.out, "base-server.log"))
		if err != nil {
			return tracingResult{}, fmt.Errorf("-tracing-base-bin: %w", err)
		}
		defer func() { _ = bsrv.stop() }()
		base = newGQLClient(bsrv.URL, most+8)
	}
	var r tracingResult
	for i, n := range clients {
		if ctx.Err() != nil {
			break
		}
		cell := tracingCell{clients: n}
		if base != nil {
			cell.base = closedLoop(ctx, n, o.cellDur, reserveVia(b, spreadSKU, true, 310_000+i, n, func(int) *gqlClient { return base }))
		}
		cell.off = closedLoop(ctx, n, o.cellDur, reserveVia(b, spreadSKU, true, 300_000+2*i, n, func(int) *gqlClient { return b.gql }))
		cell.on = closedLoop(ctx, n, o.cellDur, reserveVia(b, spreadSKU, true, 300_001+2*i, n, func(int) *gqlClient { return traced }))
		logf("tracing at %d clients: off %.0f reserves/s p50 %.2f ms; on %.0f reserves/s p50 %.2f ms (%d failed, first: %v %v)",
			n, cell.off.opsPerSec(), cell.off.lat.quantile(0.5), cell.on.opsPerSec(), cell.on.lat.quantile(0.5),
			cell.off.failed+cell.on.failed, cell.off.firstErr, cell.on.firstErr)
		r.cells = append(r.cells, cell)
	}
	// The last spans leave within the exporter's schedule delay (5 s).
	select {
	case <-time.After(6 * time.Second):
	case <-ctx.Done():
	}
	r.spans, r.exports, r.kilobytes = sink.spans.Load(), sink.exports.Load(), sink.bytes.Load()>>10
	if problem, err := b.checkInvariants(ctx); err != nil || problem != "" {
		return r, fmt.Errorf("after the tracing row: %s%s", problem, errString(err))
	}
	return r, ctx.Err()
}

// markdown renders the row.
func (r *tracingResult) markdown() string {
	var b strings.Builder
	b.WriteString("\n## Tracing\n\n")
	b.WriteString("Reserves (checkout token, 1 of 10,000 SKUs) against an instance with tracing off, and against a second instance of the same binary on the same database (a database of the row's own) tracing every request (`OTEL_TRACES_SAMPLER=always_on`) to a local OTLP/HTTP endpoint that decodes what it receives, cell after cell at each client count.\n\n")
	b.WriteString("| clients | off reserves/s | off p50 ms | off p99 ms | on reserves/s | on p50 ms | on p99 ms | on ÷ off | failed |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var holds int64
	for _, c := range r.cells {
		ratio := 0.0
		if c.off.opsPerSec() > 0 {
			ratio = c.on.opsPerSec() / c.off.opsPerSec()
		}
		holds += int64(c.on.lat.n)
		fmt.Fprintf(&b, "| %d | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f | %d |\n", c.clients,
			c.off.opsPerSec(), c.off.lat.quantile(0.5), c.off.lat.quantile(0.99),
			c.on.opsPerSec(), c.on.lat.quantile(0.5), c.on.lat.quantile(0.99), ratio, c.off.failed+c.on.failed)
	}
	if len(r.cells) > 0 && r.cells[0].base.lat.n > 0 {
		b.WriteString("\nThe same cells against `-tracing-base-bin` (tracing off), just before each pair above:\n\n")
		b.WriteString("| clients | base reserves/s | base p50 ms | base p99 ms | off ÷ base |\n|---:|---:|---:|---:|---:|\n")
		for _, c := range r.cells {
			ratio := 0.0
			if c.base.opsPerSec() > 0 {
				ratio = c.off.opsPerSec() / c.base.opsPerSec()
			}
			fmt.Fprintf(&b, "| %d | %.0f | %.2f | %.2f | %.2f |\n", c.clients, c.base.opsPerSec(), c.base.lat.quantile(0.5), c.base.lat.quantile(0.99), ratio)
		}
	}
	if holds > 0 {
		fmt.Fprintf(&b, "\nThe endpoint received %d spans in %d exports, %d KB: %.1f spans per traced reserve.\n",
			r.spans, r.exports, r.kilobytes, float64(r.spans)/float64(holds))
	}
	return b.String()
}

// otlpSink is a minimal OTLP/HTTP traces endpoint that decodes and counts
// what it receives, as a collector would, and keeps nothing.
type otlpSink struct {
	url                   string
	srv                   *http.Server
	spans, exports, bytes atomic.Int64
}

func startOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp sink: %w", err)
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.exports.Add(1)
		s.bytes.Add(int64(len(body)))
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				s.spans.Add(int64(len(ss.Spans)))
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) close() { _ = s.srv.Close() }
