package e2e

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// goFile is one Go file of the repository and what it imports.
type goFile struct {
	path    string // from the repository's root, e.g. "store/reserve.go"
	pkg     string // its directory, e.g. "store"; "." at the root
	test    bool
	imports []string
}

// goFiles parses the imports of every Go file in the repository.
func goFiles(t *testing.T) []goFile {
	t.Helper()
	var files []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(repo(), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repo(), path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Dot directories (.data's PostgreSQL, .git), node_modules
			// and testdata hold no package of ours.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		g := goFile{path: filepath.ToSlash(rel), pkg: filepath.ToSlash(filepath.Dir(rel)), test: strings.HasSuffix(path, "_test.go")}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			g.imports = append(g.imports, p)
		}
		files = append(files, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// importRule is one rule of the layout: which packages may import what
// matches a prefix.
type importRule struct {
	what   string   // what is imported, for the message
	prefix []string // import paths that start with one of these
	// allowed are the packages that may import it in their non-test
	// files; tests may import anything but e2e and faults.
	allowed []string
	why     string
}

// importRules are docs/development.md's rules of the house: each outside
// dependency has one package that speaks it, SQL lives in store, the
// resolvers reach the database only through domain interfaces.
var importRules = []importRule{
	{what: "pgx", prefix: []string{"github.com/jackc/pgx", "github.com/jackc/pgxlisten"},
		allowed: []string{"store", "app", "migrations", "jobs", "events", "metrics", "pgtest", "testkit", "bench"},
		why:     "SQL lives in store; app wires pools, migrations runs the schema, jobs is River's (pgx-typed) client, events holds the LISTEN connection, metrics reads pool statistics; pgtest, testkit and bench are test tools"},
	{what: "River", prefix: []string{"github.com/riverqueue/", "riverqueue.com/"},
		allowed: []string{"jobs", "app", "migrations"},
		why:     "jobs defines and works the jobs, app starts the client and mounts River UI, migrations runs River's own migrations"},
	{what: "chi", prefix: []string{"github.com/go-chi/"}, allowed: []string{"api"}, why: "api is the HTTP surface"},
	{what: "Prometheus", prefix: []string{"github.com/prometheus/"}, allowed: []string{"metrics"}, why: "metrics is what /metrics reports"},
	{what: "cobra", prefix: []string{"github.com/spf13/cobra"}, allowed: []string{"cli"}, why: "cli is the command line"},
	{what: "store", prefix: []string{"inventory/store"},
		allowed: []string{"app", "cli", "jobs", "metrics", "testkit"},
		why:     "resolvers and api reach the database through domain's interfaces, which app fills with a store"},
	{what: "e2e or faults", prefix: []string{"inventory/e2e", "inventory/faults"}, allowed: nil,
		why: "they are tests of the whole: nothing builds on them"},
}

// TestImportRules: the layout's rules hold in every non-test file, and domain
// imports the standard library only (its types and error codes are what
// every other package shares, so it depends on none of them).
func TestImportRules(t *testing.T) {
	t.Parallel()
	files := goFiles(t)
	if len(files) < 100 {
		t.Fatalf("found %d Go files; the walk is broken", len(files))
	}
	for _, f := range files {
		for _, imp := range f.imports {
			if f.pkg == "domain" && !f.test && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				t.Errorf("%s imports %s: domain imports the standard library only", f.path, imp)
			}
			if f.pkg == "domain" && !f.test && strings.HasPrefix(imp, "inventory/") {
				t.Errorf("%s imports %s: domain imports nothing of ours", f.path, imp)
			}
			for _, r := range importRules {
				if !slices.ContainsFunc(r.prefix, func(p string) bool { return underPath(imp, p) }) {
					continue
				}
				tested := r.what != "e2e or faults" && f.test
				if !tested && !slices.Contains(r.allowed, f.pkg) && !strings.HasPrefix(f.pkg+"/", importOwner(imp)) {
					t.Errorf("%s imports %s: only %v may import %s (%s)", f.path, imp, r.allowed, r.what, r.why)
				}
			}
		}
	}
}

// underPath says whether imp is the package p or one below it; a p ending
// in "/" is a whole host or organization.
func underPath(imp, p string) bool {
	if strings.HasSuffix(p, "/") {
		return strings.HasPrefix(imp, p)
	}
	return imp == p || strings.HasPrefix(imp, p+"/")
}

// importOwner is the directory of one of our own packages ("store/" for
// inventory/store), so a package's own tests and subpackages are not
// counted as importing it from outside.
func importOwner(imp string) string {
	if rest, ok := strings.CutPrefix(imp, "inventory/"); ok {
		return rest + "/"
	}
	return "\x00"
}

// TestTestOnlyPackages: e2e and faults hold a doc.go and tests, nothing a
// program could import.
func TestTestOnlyPackages(t *testing.T) {
	t.Parallel()
	for _, f := range goFiles(t) {
		if (f.pkg == "e2e" || f.pkg == "faults") && !f.test && filepath.Base(f.path) != "doc.go" {
			t.Errorf("%s: %s holds only doc.go and tests", f.path, f.pkg)
		}
	}
}

// TestRepositoryRoot: the root holds the main package alone (server.go),
// the schema and the project's files: a newcomer's `ls` shows where things
// are, not 95 files of one package.
func TestRepositoryRoot(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(repo())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if name := e.Name(); !e.IsDir() && strings.HasSuffix(name, ".go") && name != "server.go" {
			t.Errorf("%s at the repository's root: the root's only Go file is server.go; move it into the package of its job", name)
		}
	}
}

// maxGoFileLines is the length past which a hand-written Go file has more
// than one job: split it by job.
const maxGoFileLines = 600

// TestGoFileSizes: every hand-written Go file stays under maxGoFileLines
// (gqlgen's output in graph/ is generated, and marked so).
func TestGoFileSizes(t *testing.T) {
	t.Parallel()
	for _, f := range goFiles(t) {
		lines, generated := countLines(t, repo(f.path))
		if !generated && lines > maxGoFileLines {
			t.Errorf("%s: %d lines; split it by job to stay under %d", f.path, lines, maxGoFileLines)
		}
	}
}

// countLines is a file's line count, and whether it carries Go's
// "Code generated … DO NOT EDIT." marker.
func countLines(t *testing.T, path string) (int, bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, generated := 0, false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		n++
		if line := s.Text(); strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			generated = true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return n, generated
}
