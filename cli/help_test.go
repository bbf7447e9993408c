package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"inventory/config"

	"github.com/spf13/cobra"
)

// TestCLIUnknownCommandSuggests: a mistyped command is a usage error (exit
// 2) that says so in a few lines with cobra's "Did you mean this?" and the
// command meant, not the whole usage; also with the flags of the command
// meant after it, and one level down.
func TestCLIUnknownCommandSuggests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string // the suggestion; "" for none
	}{
		{[]string{"tokn", "create"}, "token"},
		{[]string{"tokn", "create", "--role", "admin", "--name", "x"}, "token"},
		{[]string{"token", "creat", "--role", "admin"}, "create"},
		{[]string{"migrate", "stauts"}, "status"},
		{[]string{"recon"}, "reconcile"},
		{[]string{"bogus"}, ""},
	} {
		line := "inventory " + strings.Join(c.args, " ")
		stdout, stderr, err := cliRun(t, map[string]string{}, c.args...)
		var usage UsageError
		if !errors.As(err, &usage) {
			t.Errorf("%s: err %v, want a usage error (exit 2)", line, err)
		}
		lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1
		if stdout != "" || lines > 8 || strings.Contains(stderr, "Usage:") || strings.Contains(stderr, "Available Commands") {
			t.Errorf("%s: %d lines, want a short error without the usage:\n%s%s", line, lines, stdout, stderr)
		}
		if !strings.Contains(stderr, "unknown command") || !strings.Contains(stderr, "--help") {
			t.Errorf("%s: does not say the command is unknown and where the commands are listed:\n%s", line, stderr)
		}
		if c.want != "" && (!strings.Contains(strings.ToLower(stderr), "did you mean") || !strings.Contains(stderr, "\t"+c.want+"\n")) {
			t.Errorf("%s: no \"did you mean %s\":\n%s", line, c.want, stderr)
		}
		if c.want == "" && strings.Contains(strings.ToLower(stderr), "did you mean") {
			t.Errorf("%s: suggests something:\n%s", line, stderr)
		}
	}
}

// TestCLIMissingDatabaseURLSaysDevEnv: a command run in a shell without
// make run's settings says how to load them.
func TestCLIMissingDatabaseURLSaysDevEnv(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"reconcile"}, {"migrate"}, {"token", "create", "--role", "service", "--name", "x"}} {
		_, _, err := cliRun(t, map[string]string{}, args...)
		if err == nil || !strings.Contains(err.Error(), "DATABASE_URL is not set") || !strings.Contains(err.Error(), "set -a; . .data/dev.env; set +a") {
			t.Errorf("inventory %s without DATABASE_URL: %v", strings.Join(args, " "), err)
		}
	}
}

// helpSettings is the Environment section of a help page: the settings it
// names, and whether it has the heading at all.
func helpSettings(t *testing.T, page string) ([]string, bool) {
	t.Helper()
	_, section, found := strings.Cut(page, "\nEnvironment:\n")
	if !found {
		if strings.Contains(page, "Environment:") {
			t.Errorf("an Environment: heading that is not a line of its own:\n%s", page)
		}
		return nil, false
	}
	var names []string
	entry := regexp.MustCompile(`^  ([A-Z][A-Z0-9_]+)\s+\S`)
	for _, line := range strings.Split(section, "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			break
		}
		names = append(names, m[1])
	}
	return names, true
}

// commandPaths is every command of the CLI but cobra's own (help,
// completion), as the words that run it.
func commandPaths() [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(newRootCommand(context.Background(), func(string) string { return "" }, io.Discard, io.Discard), nil)
	return paths
}

// TestCLIHelpEnvironmentIsExact walks every command's help: an Environment
// heading always has settings under it, each one of settings.go; for a
// command that reads only some settings (all but serve), each listed one is
// read (an invalid value of it is refused by name) and no other is (every
// other setting invalid at once changes nothing: the command gets as far as
// connecting to the database).
func TestCLIHelpEnvironmentIsExact(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, s := range config.Settings {
		known[s.Name] = true
	}
	// The arguments that get each command as far as its database; a
	// command whose help lists settings must be here.
	args := map[string][]string{
		"migrate":        nil,
		"migrate status": nil,
		"token create":   {"--role", "admin", "--name", "x"},
		"token revoke":   {"x"},
		"import":         {"--sku", "S", "--location", "L", "--batch", "B", "codes.txt"},
		"codes rekey":    nil,
		"stock import":   {"stock.csv"},
		"reconcile":      nil,
		"demo":           nil,
	}
	// A complete, valid environment whose database refuses connections.
	base := map[string]string{"DATABASE_URL": "postgres://inventory@127.0.0.1:1/inventory?sslmode=disable",
		"INVENTORY_TOKEN_SECRET": strings.Repeat("t", 32), "INVENTORY_CODES_KEY": "k1:" + testCodesKey, "INVENTORY_CODES_HMAC_KEY": testHMACKey}
	// An invalid value of each setting, and what its refusal says.
	invalid := func(name string) (string, string) {
		switch name {
		case "DATABASE_URL":
			return "", "DATABASE_URL is not set"
		case "DATABASE_DIRECT_URL", "DATABASE_REPLICA_URL":
			return "postgres://inventory@127.0.0.1:1/inventory?sslmode=bogus", name + ":"
		}
		return "bogus!", name
	}
	mentions := func(err error, name string) bool {
		return err != nil && regexp.MustCompile(`\b`+name+`\b`).MatchString(err.Error())
	}
	listedAnywhere := 0
	for _, path := range commandPaths() {
		name := strings.Join(path, " ")
		stdout, _, err := cliRun(t, map[string]string{}, append(slices.Clone(path), "--help")...)
		if err != nil {
			t.Fatalf("inventory %s --help: %v", name, err)
		}
		listed, heading := helpSettings(t, stdout)
		if heading && len(listed) == 0 {
			t.Errorf("inventory %s --help: an empty Environment: heading:\n%s", name, stdout)
		}
		for _, s := range listed {
			if !known[s] {
				t.Errorf("inventory %s --help lists %s, which is no setting of settings.go", name, s)
			}
		}
		listedAnywhere += len(listed)
		if name == "" || name == "serve" || len(listed) == 0 {
			continue // serve reads every setting (TestSettingsMatchConfig)
		}
		cmdArgs, ok := args[name]
		if !ok {
			t.Errorf("inventory %s lists settings; add its arguments to this test", name)
			continue
		}
		line := append(slices.Clone(path), cmdArgs...)
		for _, s := range listed {
			env := maps.Clone(base)
			value, says := invalid(s)
			env[s] = value
			if _, _, err := cliRun(t, env, line...); err == nil || !strings.Contains(err.Error(), says) {
				t.Errorf("inventory %s lists %s but does not read it: with %s=%q: %v", name, s, s, value, err)
			}
		}
		env := maps.Clone(base)
		for _, s := range config.Settings {
			if !slices.Contains(listed, s.Name) {
				env[s.Name], _ = invalid(s.Name)
			}
		}
		_, _, err = cliRun(t, env, line...)
		if err == nil || !strings.Contains(err.Error(), "connect to database (DATABASE_URL)") {
			first, _, _ := strings.Cut(fmt.Sprint(err), "\n")
			t.Errorf("inventory %s with every setting it does not list invalid: %s…, want it to go on to connect", name, first)
		}
		var unlisted []string
		for _, s := range config.Settings {
			if !slices.Contains(listed, s.Name) && mentions(err, s.Name) {
				unlisted = append(unlisted, s.Name)
			}
		}
		if len(unlisted) > 0 {
			t.Errorf("inventory %s reads %d settings its help does not list: %s", name, len(unlisted), strings.Join(unlisted, " "))
		}
	}
	if listedAnywhere == 0 {
		t.Fatal("no help page lists a setting")
	}
}
