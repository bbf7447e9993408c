package api

import (
	"strings"
	"testing"
)

func TestLongName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxNameBytes+1)
	ok := strings.Repeat("b", MaxNameBytes)
	for _, c := range []struct {
		doc  string
		long bool
	}{
		{"{ " + ok + ": locations { code } }", false},
		{"{ " + long + ": locations { code } }", true},
		{`{ sku(code: "` + long + `") { code } }`, false},
		{`{ sku(code: "\"` + long + `") { code } }`, false},
		{"# " + long + "\n{ locations { code } }", false},
		{`{ sku(code: """` + long + ` " x""") { code } }`, false},
		{"query " + long + " { locations { code } }", true},
		{"query($" + long + ": Int) { locations { code } }", true},
	} {
		if got := longName(c.doc) != ""; got != c.long {
			t.Errorf("longName(%.60q…) found one: %v, want %v", c.doc, got, c.long)
		}
	}
}
