package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documentation's links cannot rot: every relative link in README.md
// and docs/**/*.md, and every alert's runbook_url, names a file of the
// repository, and its #anchor a heading of that file, as GitHub renders it.
// Links to http(s) and mailto are not checked (they need the network); no
// link may leave the repository (a reader of the repository on GitHub, or of
// a release archive, has nothing outside it).

func TestDocsLinksResolve(t *testing.T) {
	var broken []string
	for _, file := range docFiles(t) {
		file = path.Clean(strings.ReplaceAll(file, `\`, "/"))
		raw, err := os.ReadFile(repo(file))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(raw)) {
			if err := checkRepoLink(path.Dir(file), file, l.target); err != nil {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %v", file, l.line, l.target, err))
			}
		}
	}
	for _, a := range alertRules(t) {
		if a.runbookURL == "" {
			continue // TestOpsAlertsHaveRunbooks reports it
		}
		if err := checkRepoLink(".", "", a.runbookURL); err != nil {
			broken = append(broken, fmt.Sprintf("ops/prometheus/alerts.yml: %s runbook_url %s: %v", a.name, a.runbookURL, err))
		}
	}
	if len(broken) > 0 {
		t.Fatalf("%d broken links:\n%s", len(broken), strings.Join(broken, "\n"))
	}
}

// TestDocsSlugs pins githubSlug to anchors GitHub gives real headings.
func TestDocsSlugs(t *testing.T) {
	for heading, want := range map[string]string{
		"Fair use, rate limits, CORS":                          "fair-use-rate-limits-cors",
		"Codes key (`INVENTORY_CODES_KEY`)":                    "codes-key-inventory_codes_key",
		"What bounds three instances here, and the 0.9 target": "what-bounds-three-instances-here-and-the-09-target",
		"Past one primary: sharding by SKU (a design note)":    "past-one-primary-sharding-by-sku-a-design-note",
		"make run and make stop":                               "make-run-and-make-stop",
		"HTTP surface":                                         "http-surface",
		"InventoryOverdueHolds":                                "inventoryoverdueholds",
		"Stock and catalog (admin)":                            "stock-and-catalog-admin",
		"Client guide: [webhooks](x.md) **now**":               "client-guide-webhooks-now",
		"A  double space":                                      "a--double-space",
		"Ünïcode & symbols → kept?":                            "ünïcode--symbols--kept",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
	anchors := headingAnchors("# A\n\n```sh\n# not a heading\n```\n## A\n### A ##\n<a id=\"custom\"></a>\n")
	for _, want := range []string{"a", "a-1", "a-2", "custom"} {
		if !anchors[want] {
			t.Errorf("headingAnchors: no %q in %v", want, anchors)
		}
	}
	if anchors["not-a-heading"] {
		t.Error("headingAnchors took a comment inside a code block for a heading")
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>\n]*>|[^\s)]*)`)
	refDef     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]\n]+\]:[ \t]*(<[^>\n]*>|\S+)`)
	htmlLink   = regexp.MustCompile(`(?i)<(?:a|img)\s[^>]*?\b(?:href|src)\s*=\s*"([^"]*)"`)
	urlScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// markdownLinks returns the targets of a Markdown text's inline links and
// images (their text may span lines), reference definitions and HTML
// href/src attributes, outside code blocks and code spans.
func markdownLinks(text string) []mdLink {
	text = blankCodeSpans(blankFences(text))
	var links []mdLink
	for _, re := range []*regexp.Regexp{inlineLink, refDef, htmlLink} {
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			target := strings.TrimSuffix(strings.TrimPrefix(text[m[2]:m[3]], "<"), ">")
			links = append(links, mdLink{line: 1 + strings.Count(text[:m[2]], "\n"), target: target})
		}
	}
	return links
}

// checkRepoLink checks one link target written in a file of directory dir
// (from the repository's root; file is the page itself, for #anchor-only
// links).
func checkRepoLink(dir, file, target string) error {
	if target == "" {
		return fmt.Errorf("empty link")
	}
	if scheme := urlScheme.FindString(target); scheme != "" {
		switch strings.ToLower(scheme) {
		case "http:", "https:", "mailto:":
			return nil
		}
		return fmt.Errorf("scheme %s: link a file of the repository, or an http(s) page", scheme)
	}
	p, anchor, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(p)
	if err != nil {
		return err
	}
	if anchor, err = url.PathUnescape(anchor); err != nil {
		return err
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("absolute path: write it relative to the page")
	}
	dest := file
	if p != "" {
		dest = path.Clean(path.Join(dir, p))
	}
	if dest == "" {
		return fmt.Errorf("no file")
	}
	if dest == ".." || strings.HasPrefix(dest, "../") {
		return fmt.Errorf("leaves the repository (%s): readers of the repository do not have it", dest)
	}
	fi, err := os.Stat(repo(dest))
	if err != nil {
		return fmt.Errorf("no such file in the repository: %s", dest)
	}
	if anchor == "" {
		return nil
	}
	if fi.IsDir() {
		dest = path.Join(dest, "README.md") // what GitHub shows for a folder
	}
	if !strings.HasSuffix(dest, ".md") {
		return nil // e.g. #L12 of a source file
	}
	raw, err := os.ReadFile(repo(dest))
	if err != nil {
		return fmt.Errorf("#%s: %v", anchor, err)
	}
	if !headingAnchors(string(raw))[anchor] {
		return fmt.Errorf("%s has no heading whose anchor is #%s", dest, anchor)
	}
	return nil
}

var (
	atxHeading   = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	explicitName = regexp.MustCompile(`(?i)<a\s[^>]*?\b(?:id|name)\s*=\s*"([^"]+)"`)
)

// headingAnchors returns the anchors of a Markdown text: its ATX headings'
// GitHub slugs (a repeated slug gets -1, -2, … in order) and explicit
// <a id=…> or <a name=…> anchors.
func headingAnchors(text string) map[string]bool {
	text = blankFences(text)
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := githubSlug(m[2])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	for _, m := range explicitName.FindAllStringSubmatch(text, -1) {
		anchors[m[1]] = true
	}
	return anchors
}

var (
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// githubSlug is the anchor GitHub gives a heading: its rendered text (code
// spans' content, links' text, no tags) in lower case, without punctuation
// and symbols except '-' and '_', each space a '-'.
func githubSlug(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// blankFences replaces the lines of fenced code blocks (``` or ~~~, fences
// included) with empty lines, keeping line numbers.
func blankFences(text string) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " \t")
		if fence == "" {
			for _, f := range []string{"```", "~~~"} {
				if strings.HasPrefix(trimmed, f) {
					n := len(trimmed) - len(strings.TrimLeft(trimmed, f[:1]))
					fence = strings.Repeat(f[:1], n)
					lines[i] = ""
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
			fence = ""
		}
		lines[i] = ""
	}
	return strings.Join(lines, "\n")
}

// blankCodeSpans replaces the content of `code spans` (of any number of
// backticks, possibly across lines) with spaces, keeping newlines.
func blankCodeSpans(text string) string {
	b := []byte(text)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		open := i + n
		end := -1
		for j := open; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 0
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				end = j
				break
			}
			j += m
		}
		if end < 0 {
			i = open // a lone run of backticks is literal
			continue
		}
		for k := open; k < end; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = end + n
	}
	return string(b)
}
