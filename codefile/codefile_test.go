package codefile

import (
	"strings"
	"testing"
)

func collect(t *testing.T, in string) []string {
	t.Helper()
	var out []string
	for line, err := range Lines(strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, line)
	}
	return out
}

func TestLines(t *testing.T) {
	t.Parallel()
	got := collect(t, "code,batch\nAAA-1,b1\r\n\"BB,2\",x\n\nCCC\n")
	want := []string{"AAA-1", "BB,2", "", "CCC"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q want %q", got, want)
	}
	if got := collect(t, "\n\nX1\nX2"); strings.Join(got, "|") != "||X1|X2" {
		t.Fatalf("no header: %q", got)
	}
	if got := collect(t, `"unterminated`+"\n"); len(got) != 1 || !strings.HasSuffix(got[0], "\x00") {
		t.Fatalf("broken CSV line: %q", got)
	}
	var failed bool
	for _, err := range Lines(strings.NewReader(strings.Repeat("x", MaxLineBytes+1))) {
		failed = failed || err != nil
	}
	if !failed {
		t.Fatal("an over-long line did not fail the file")
	}
}
