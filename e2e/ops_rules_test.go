package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"inventory/pgtest"
)

// metricName finds the server's metric names in a PromQL expression.
var metricName = regexp.MustCompile(`\binventory_[a-z_]+`)

// TestShippedAlertRulesAndDashboard checks ops/prometheus/alerts.yml with
// promtool (Debian's prometheus package; make test installs it), and that
// every metric the rules and the Grafana dashboard name is one a running
// server exports, so neither can drift from the code unnoticed.
func TestShippedAlertRulesAndDashboard(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Debian's prometheus package (make test does)")
	}
	if out, err := exec.Command(promtool, "check", "rules", repo("ops/prometheus/alerts.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}

	rules, err := os.ReadFile(repo("ops/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(repo("ops/grafana/inventory-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil || len(dash.Panels) == 0 {
		t.Fatalf("dashboard JSON: %v (%d panels)", err, len(dash.Panels))
	}
	exprs := string(rules)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs += "\n" + tg.Expr
		}
	}

	// A replica URL, so the standby's metrics are exported: the primary
	// itself, which the monitor refuses (not a standby) and reports down.
	ts := setupWith(t, map[string]string{"DATABASE_REPLICA_URL": pgtest.DirectURL(t, pgtest.NewDatabase(t))})
	ts.seed("HP", 1) // so the counter vectors have series
	if _, err := decodeReserve(ts.gql(ts.service, reserveMutation, reserveVars("cart-1", "k", "HP", 1))); err != nil {
		t.Fatal(err)
	}
	_, body := httpGetAs(t, ts.url+"/metrics", ts.admin)
	for _, name := range metricName.FindAllString(exprs, -1) {
		base := strings.TrimSuffix(name, "_bucket")
		if !strings.Contains(body, "\n"+base) && !strings.Contains(body, "\n"+name) {
			t.Errorf("%s is named by the shipped rules or dashboard but not exported", name)
		}
	}
	for _, must := range []string{"inventory_overdue_holds 0", "inventory_held_reservations 1", "inventory_operations_snapshot_ok 1",
		`inventory_db_pool_max_connections{pool="jobs"}`, "inventory_reconciliation_issues 0"} {
		if !strings.Contains(body, must) {
			t.Errorf("/metrics lacks %q", must)
		}
	}
}

// alertRule is one alert of ops/prometheus/alerts.yml.
type alertRule struct {
	name, runbookURL string
}

var (
	alertLine   = regexp.MustCompile(`^\s*- alert:\s*(\S+)\s*$`)
	recordLine  = regexp.MustCompile(`^\s*- record:`)
	runbookLine = regexp.MustCompile(`^\s*runbook_url:\s*"?([^"\s]*)"?\s*$`)
)

// alertRules reads the alerts of ops/prometheus/alerts.yml and their
// runbook_url annotations, line by line (promtool has checked the YAML).
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(repo("ops/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []alertRule
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if m := alertLine.FindStringSubmatch(line); m != nil {
			rules = append(rules, alertRule{name: m[1]})
			in = true
		} else if recordLine.MatchString(line) {
			in = false
		} else if m := runbookLine.FindStringSubmatch(line); m != nil && in {
			rules[len(rules)-1].runbookURL = m[1]
		}
	}
	if len(rules) == 0 {
		t.Fatal("no alerts found in ops/prometheus/alerts.yml")
	}
	return rules
}

// TestOpsAlertsHaveRunbooks: every shipped alert carries a runbook_url, from
// the repository's root, to its own section of docs/operations/alerts.md
// (the heading is the alert's name), and that section exists.
func TestOpsAlertsHaveRunbooks(t *testing.T) {
	for _, a := range alertRules(t) {
		want := "docs/operations/alerts.md#" + githubSlug(a.name)
		if a.runbookURL != want {
			t.Errorf("alert %s: runbook_url %q, want %q", a.name, a.runbookURL, want)
			continue
		}
		if err := checkRepoLink(".", "", a.runbookURL); err != nil {
			t.Errorf("alert %s: runbook_url %s: %v", a.name, a.runbookURL, err)
		}
	}
}
