package e2e

import "path/filepath"

// repo is a path in the repository, given from its root. go test runs
// these tests in this package's directory; the docs, scripts, examples and
// operations files they check are the repository's.
func repo(path ...string) string {
	return filepath.Join(append([]string{".."}, path...)...)
}
