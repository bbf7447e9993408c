package e2e

import (
	"bufio"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"inventory/pgtest"
)

// maxDocPage is the size a documentation page must stay under: past it a
// page is several tasks, and is split (docs/operations/ is one such split).
const maxDocPage = 30_000

// TestDocsPageSizes: every page of README.md and docs/ stays under 30,000
// bytes, but docs/configuration.md, which `inventory settings` generates
// (one table row per setting).
func TestDocsPageSizes(t *testing.T) {
	for _, file := range docFiles(t) {
		if path.Clean(file) == "docs/configuration.md" {
			continue
		}
		fi, err := os.Stat(repo(file))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= maxDocPage {
			t.Errorf("%s is %d bytes; keep every page under %d: split it by task", file, fi.Size(), maxDocPage)
		}
	}
}

// TestDocsEveryPageIsLinked: every page under docs/ can be reached by
// following relative links from README.md or docs/index.md, so no page is
// written that no reader finds.
func TestDocsEveryPageIsLinked(t *testing.T) {
	reached := map[string]bool{}
	queue := []string{"README.md", "docs/index.md"}
	for len(queue) > 0 {
		file := queue[0]
		queue = queue[1:]
		if reached[file] {
			continue
		}
		raw, err := os.ReadFile(repo(file))
		if err != nil {
			continue // a broken link: TestDocsLinksResolve reports it
		}
		reached[file] = true
		for _, l := range markdownLinks(string(raw)) {
			if urlScheme.MatchString(l.target) {
				continue
			}
			p, _, _ := strings.Cut(l.target, "#")
			if p == "" {
				continue
			}
			dest := path.Clean(path.Join(path.Dir(file), p))
			if fi, err := os.Stat(repo(dest)); err == nil && fi.IsDir() {
				dest = path.Join(dest, "README.md")
			}
			if strings.HasSuffix(dest, ".md") && !reached[dest] {
				queue = append(queue, dest)
			}
		}
	}
	for _, file := range docFiles(t) {
		if !reached[path.Clean(file)] {
			t.Errorf("%s is not linked from README.md or docs/index.md (directly or through other pages): link it, or delete it", file)
		}
	}
}

// metricsTableRow is a row of docs/operations/metrics.md's table.
var metricsTableRow = regexp.MustCompile("^\\| `(inventory_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// TestDocsMetricsTable: docs/operations/metrics.md's table lists exactly the
// inventory_* metrics a running server exports, each with its type and its
// labels. The server has a standby URL, so the replica's series are there,
// and has served a reserve, so every vector has series.
func TestDocsMetricsTable(t *testing.T) {
	t.Parallel()
	type metric struct {
		typ    string
		labels []string
	}
	documented := map[string]metric{}
	f, err := os.Open(repo("docs/operations/metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := metricsTableRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		if _, dup := documented[m[1]]; dup {
			t.Errorf("metrics.md lists %s twice", m[1])
		}
		documented[m[1]] = metric{typ: m[2], labels: labels}
	}
	if len(documented) == 0 {
		t.Fatal("docs/operations/metrics.md has no metrics table rows (| `inventory_…` | type | labels | meaning |)")
	}

	// A replica URL, so the standby's metrics are exported: the primary
	// itself, which the monitor refuses (not a standby) and reports down.
	ts := setupWith(t, map[string]string{"DATABASE_REPLICA_URL": pgtest.DirectURL(t, pgtest.NewDatabase(t))})
	ts.seed("HP", 1)
	if _, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "k", "HP", 1))); err != nil {
		t.Fatal(err)
	}
	_, body := httpGetAs(t, ts.url+"/metrics", ts.admin)

	exported := map[string]metric{}
	labelSets := map[string]map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if strings.HasPrefix(name, "inventory_") {
				exported[name] = metric{typ: typ}
				labelSets[name] = map[string]bool{}
			}
			continue
		}
		if !strings.HasPrefix(line, "inventory_") {
			continue
		}
		series, _, _ := strings.Cut(line, " ")
		name, labels, _ := strings.Cut(series, "{")
		if _, ok := labelSets[name]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(name, suffix); base != name && exported[base].typ == "histogram" {
					name = base
					break
				}
			}
		}
		set, ok := labelSets[name]
		if !ok {
			t.Errorf("/metrics: series %s has no # TYPE line", series)
			continue
		}
		for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if k, _, ok := strings.Cut(kv, "="); ok && k != "le" {
				set[k] = true
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(exported)) {
		e := exported[name]
		d, ok := documented[name]
		if !ok {
			t.Errorf("%s (%s) is exported but not in docs/operations/metrics.md's table", name, e.typ)
			continue
		}
		if d.typ != e.typ {
			t.Errorf("metrics.md: %s is a %s, the server exports a %s", name, d.typ, e.typ)
		}
		labels := slices.Sorted(maps.Keys(labelSets[name]))
		if !slices.Equal(d.labels, labels) {
			t.Errorf("metrics.md: %s has labels %v, the server exports %v", name, d.labels, labels)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := exported[name]; !ok {
			t.Errorf("metrics.md lists %s, which the server does not export", name)
		}
	}
}
