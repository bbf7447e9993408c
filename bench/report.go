package main

import (
	"fmt"
	"html"
	"math"
	"runtime"
	"strings"
	"time"
)

// row is one measured cell: one scenario (ours or baseline) at one client count.
type row struct {
	key, name  string
	baseline   bool
	clients    int
	res        loadResult
	baseOps    float64 // ours: the baseline cell's ops/s at the same client count
	target     target
	ceilOps    float64 // availability: the ceiling handler's ops/s at the same client count
	ceilTarget target
	rssMB      float64
	check      string // ours: "ok" or what failed
	// ours: the pgbench and naive server rows at the same client count
	// (nil without one)
	pgbench, naive *row
	// the write rows' CPU over the cell (ours, pgbench's, the naive
	// server's), nil for the others or where it cannot be read
	cpu *cellCPU
}

func (r row) ratio() float64 {
	if r.baseOps <= 0 {
		return 0
	}
	return r.res.opsPerSec() / r.baseOps
}

// ceilingRatio is ours over the ceiling handler, 0 without one.
func (r row) ceilingRatio() float64 {
	if r.ceilOps <= 0 {
		return 0
	}
	return r.res.opsPerSec() / r.ceilOps
}

// ceilingNote is ", ceiling 0.42" for a row compared with the ceiling.
func (r row) ceilingNote() string {
	if r.ceilOps <= 0 {
		return ""
	}
	return fmt.Sprintf(", to the ceiling %.2f", r.ceilingRatio())
}

// naiveRatio is ours over the naive server, 0 without one.
func (r row) naiveRatio() float64 {
	if r.naive == nil || r.naive.res.opsPerSec() <= 0 {
		return 0
	}
	return r.res.opsPerSec() / r.naive.res.opsPerSec()
}

// naiveNote is ", to the naive server 0.42" for a write row.
func (r row) naiveNote() string {
	if r.naive == nil {
		return ""
	}
	return fmt.Sprintf(", to the naive server %.2f", r.naiveRatio())
}

// report is everything the run measured, rendered as markdown and SVG.
type report struct {
	started time.Time
	cellDur time.Duration
	rows    []row
	storm   *stormResult
	fanouts []fanoutResult
	attack  *attackResult
	tracing *tracingResult
	// waitlist is the waitlist row (waitlist.go), nil when it did not run
	waitlist *waitlistResult
	// scaleout is the scale-out row (scaleout.go), nil when it did not run
	scaleout *scaleResult
	peakRSS  float64
	notes    []string
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func (rep *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# make bench, %s\n\n", rep.started.Format("2006-01-02 15:04 MST"))
	if len(rep.rows) > 0 { // -only scaleout has none
		fmt.Fprintf(&b, "%s per cell, closed loop; ours over HTTP/GraphQL to the real server binary, baseline pgbench on the same PostgreSQL and schema; cells interleaved per client count. Latency in ms. Each of our rows is compared with its pgbench row at the same client count (reserve → confirm pairs with the spread claim, availability with the 20-SKU read), and the availability rows also with the ceiling: a minimal net/http handler (bench/ceiling.go) answering the same request from a Go map with encoding/json, no GraphQL, no database, under the same load generator. The write rows are also compared with the naive server (bench/naive.go): net/http + encoding/json + a pgxpool running the same claim and an insert of a hold row in one transaction per request, no GraphQL, no coalescing, no ledger, events or expiry jobs, on SKUs stocked as ours; and show the CPU each side used per 1,000 holds, server process and the whole PostgreSQL cluster, from /proc (pgbench has no server). Baseline p50/p99 come from pgbench's per-transaction log (`--log`). Targets are shown, not enforced.\n\n", rep.cellDur)
		b.WriteString("| scenario | clients | ops/s | p50 | p99 | failed | ratio to pgbench | target | ratio to ceiling | target | ours / naive ops/s | ratio to naive | CPU s per 1,000 holds: server + PostgreSQL | server RSS MB | check |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---|\n")
		for _, r := range rep.rows {
			ratio, tgt, ceil, ceilTgt, vsNaive, naiveRatio, rss, check := "", "", "", "", "", "", "", ""
			if !r.baseline {
				ratio = fmt.Sprintf("%.2f", r.ratio())
				if r.target.clients == r.clients {
					tgt = fmt.Sprintf("≥ %g %s", r.target.ratio, mark(r.ratio() >= r.target.ratio))
				}
				if r.ceilOps > 0 {
					ceil = fmt.Sprintf("%.2f", r.ceilingRatio())
					if r.ceilTarget.clients == r.clients {
						ceilTgt = fmt.Sprintf("≥ %g %s", r.ceilTarget.ratio, mark(r.ceilingRatio() >= r.ceilTarget.ratio))
					}
				}
				if r.naive != nil {
					vsNaive = fmt.Sprintf("%.0f / %.0f", r.res.opsPerSec(), r.naive.res.opsPerSec())
					naiveRatio = fmt.Sprintf("%.2f", r.naiveRatio())
				}
				rss = fmt.Sprintf("%.0f", r.rssMB)
				check = r.check
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.2f | %.2f | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.name, r.clients, r.res.opsPerSec(), r.res.lat.quantile(0.5), r.res.lat.quantile(0.99), r.res.failed, ratio, tgt, ceil, ceilTgt,
				vsNaive, naiveRatio, r.cpuCell(), rss, check)
		}
		b.WriteString(rep.oneClientMarkdown())
	}
	if s := rep.storm; s != nil {
		b.WriteString("\n## Expiry storm\n\n")
		b.WriteString("| holds due in one second | created in | all released after the last deadline | expiry lag p50 | p99 | max | expired | still held | ended by (ledger actor) | expired twice | server RSS MB | check |\n")
		b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|\n")
		released := fmt.Sprintf("not within %s (target ≤ 15 s ✗)", s.waited)
		if s.releasedAfter >= 0 {
			released = fmt.Sprintf("%.1f s (target ≤ 15 s %s)", s.releasedAfter.Seconds(), mark(s.releasedAfter <= 15*time.Second))
		}
		check := "ok"
		if s.problem != "" {
			check = "FAIL: " + s.problem
		}
		created := fmt.Sprintf("%d", s.created)
		if s.created < s.wanted {
			created = fmt.Sprintf("%d of %d", s.created, s.wanted)
		}
		lagNote := ""
		if s.stillHeld > 0 {
			lagNote = " (≥: still held counted as now − deadline)"
		}
		fmt.Fprintf(&b, "| %s | %.1f s | %s | %.0f ms%s | %.0f ms | %.0f ms | %d | %d | %s | %d | %.0f | %s |\n",
			created, s.createSecs, released, s.lagP50, lagNote, s.lagP99, s.lagMax, s.expired, s.stillHeld, s.endedBy, s.expiredTwice, s.rssMB, check)
	}
	if len(rep.fanouts) > 0 {
		b.WriteString("\n## Fan-out\n\n")
		b.WriteString("Each row: the reserve load alone, then the same load with the subscribers attached. Delivery is commit-to-client (from the event's `at`); for `availabilityChanged` viewers, whose messages carry no commit time, it is how old each value was on arrival: from the answer to the newest reserve it reflects (every reserve takes one unit, so value V0 − k reflects the k-th answered) to the viewer's receipt. Under a steady reserve load that is the push tick's delivery delay plus the value's staleness when read; the push interval's conflation wait is not in it, and values that arrive after the load ended are not timed.\n\n")
		fmt.Fprintf(&b, "| subscribers | attached | reserve clients | reserves/s with them | without | with / without | messages delivered | delivery p50 | p99 | dropped | server RSS MB | bench CPU (of %.0f s × %d cores) |\n",
			rep.cellDur.Seconds(), runtime.NumCPU())
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, f := range rep.fanouts {
			ratio := fmt.Sprintf("%.2f", f.ratio())
			if f.spec.ratio > 0 {
				ratio += fmt.Sprintf(" (target ≥ %g %s)", f.spec.ratio, mark(f.ratio() >= f.spec.ratio))
			}
			p99 := fmt.Sprintf("%.0f ms", f.lat.quantile(0.99))
			if f.spec.p99 > 0 {
				p99 += fmt.Sprintf(" (target < %g %s)", f.spec.p99, mark(f.lat.n > 0 && f.lat.quantile(0.99) < f.spec.p99))
			}
			rss := fmt.Sprintf("%.0f", f.rssMB)
			if f.spec.rssMB > 0 {
				rss += fmt.Sprintf(" (target < %g %s)", f.spec.rssMB, mark(f.rssMB < f.spec.rssMB))
			}
			fmt.Fprintf(&b, "| %s | %d of %d | %d | %.0f | %.0f | %s | %d | %.0f ms | %s | %d | %s | %.1f s |\n",
				f.spec.name, f.attached, f.spec.subscribers, f.spec.clients, f.load.opsPerSec(), f.without.opsPerSec(), ratio, f.events,
				f.lat.quantile(0.5), p99, f.dropped, rss, f.benchCPU)
		}
	}
	if a := rep.attack; a != nil {
		b.WriteString(a.markdown())
	}
	if t := rep.tracing; t != nil {
		b.WriteString(t.markdown())
	}
	if w := rep.waitlist; w != nil {
		b.WriteString(w.markdown())
	}
	if r := rep.scaleout; r != nil {
		b.WriteString(r.markdown())
	}
	if len(rep.rows) > 0 || len(rep.fanouts) > 0 || rep.attack != nil || rep.storm != nil {
		fmt.Fprintf(&b, "\nPeak server RSS over the run (the viewers row aside, judged by its own target): %.0f MB (target < 200 MB %s).\n", rep.peakRSS, mark(rep.peakRSS < 200))
	}
	for _, n := range rep.notes {
		fmt.Fprintf(&b, "\n- %s", n)
	}
	if len(rep.notes) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

// svg draws throughput against clients, one line per scenario (baselines
// dashed), on a log scale: pgbench and HTTP differ by orders of magnitude.
func (rep *report) svg() string {
	const w, h, left, right, top, bottom = 1040.0, 540.0, 70.0, 410.0, 40.0, 50.0
	var clients []int
	type series struct {
		name     string
		baseline bool
		pts      map[int]float64
	}
	var order []string
	byKey := map[string]*series{}
	lo, hi := math.Inf(1), 0.0
	for _, r := range rep.rows {
		if !containsInt(clients, r.clients) {
			clients = append(clients, r.clients)
		}
		s := byKey[r.name]
		if s == nil {
			s = &series{name: r.name, baseline: r.baseline, pts: map[int]float64{}}
			byKey[r.name] = s
			order = append(order, r.name)
		}
		v := max(r.res.opsPerSec(), 0.1)
		s.pts[r.clients] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(clients) == 0 {
		return ""
	}
	ylo, yhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yhi <= ylo {
		yhi = ylo + 1
	}
	pw, ph := w-left-right, h-top-bottom
	x := func(i int) float64 {
		if len(clients) == 1 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(len(clients)-1)
	}
	y := func(v float64) float64 { return top + ph*(1-(math.Log10(v)-ylo)/(yhi-ylo)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="22" font-size="15">Throughput (ops/s, log scale) against clients — ours solid, pgbench dashed</text>`+"\n", left)
	for e := ylo; e <= yhi; e++ {
		v := math.Pow(10, e)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%g</text>`+"\n", left, left+pw, y(v), y(v), left-6, y(v)+4, v)
	}
	for i, c := range clients {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eee"/><text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(i), x(i), top, top+ph, x(i), top+ph+18, c)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">clients</text>`+"\n", left+pw/2, h-10)
	for si, name := range order {
		s := byKey[name]
		color := palette[si%len(palette)]
		dash := ""
		if s.baseline {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for i, c := range clients {
			if v, ok := s.pts[c]; ok {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(i), y(v), color)
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(pts, " "))
		ly := top + 10 + float64(si)*20
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			w-right+15, w-right+45, ly, ly, color, dash, w-right+50, ly+4, html.EscapeString(name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
