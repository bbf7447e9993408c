package main

import (
	"fmt"
	"strings"
)

// cpuCell is the main table's "server + PostgreSQL" CPU seconds per 1,000
// holds of a write row ("– + 0.12" for pgbench, which has no server);
// empty for the others.
func (r row) cpuCell() string {
	if r.cpu == nil {
		return ""
	}
	srv, pg := r.cpu.perThousand(r.res.ok)
	if !r.cpu.hasServer {
		return fmt.Sprintf("– + %.2f", pg)
	}
	return fmt.Sprintf("%.2f + %.2f", srv, pg)
}

// oneClientMarkdown is the one-client latency table: for each write row
// at one client, ours, the naive server's and pgbench's p50 and p99 side by
// side, what a single shopper waits for a hold with nothing queued in front
// of it. Empty when the run had no one-client cell.
func (rep *report) oneClientMarkdown() string {
	var b strings.Builder
	for _, r := range rep.rows {
		if r.baseline || r.clients != 1 || r.naive == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## One client\n\n")
			b.WriteString("Latency in ms of each write row at one client: ours over HTTP/GraphQL, the naive server over HTTP, pgbench's statement alone.\n\n")
			b.WriteString("| scenario | ours p50 | naive p50 | pgbench p50 | ours p99 | naive p99 | pgbench p99 | CPU s per 1,000 holds, ours / naive / pgbench (server + PostgreSQL) |\n")
			b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|\n")
		}
		basep50, basep99, baseCPU := "", "", ""
		if r.pgbench != nil {
			basep50, basep99, baseCPU = fmt.Sprintf("%.2f", r.pgbench.res.lat.quantile(0.5)), fmt.Sprintf("%.2f", r.pgbench.res.lat.quantile(0.99)), r.pgbench.cpuCell()
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s | %.2f | %.2f | %s | %s / %s / %s |\n", r.name,
			r.res.lat.quantile(0.5), r.naive.res.lat.quantile(0.5), basep50,
			r.res.lat.quantile(0.99), r.naive.res.lat.quantile(0.99), basep99,
			orDash(r.cpuCell()), orDash(r.naive.cpuCell()), orDash(baseCPU))
	}
	return b.String()
}
