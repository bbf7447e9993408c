package codefile

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
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

// TestLinesBOM: a byte order mark at the very start of a file (Excel writes
// one before CSV) is dropped, so neither the header nor the first code is
// lost; one anywhere else is data.
func TestLinesBOM(t *testing.T) {
	t.Parallel()
	const bom = "\ufeff"
	for _, tc := range []struct{ name, in, want string }{
		{"header and codes", bom + "code\nAAA-1\nBBB-2\n", "AAA-1|BBB-2"},
		{"CSV header, CRLF", bom + "code,batch\r\nAAA-1,b1\r\nBBB-2,b1\r\n", "AAA-1|BBB-2"},
		{"quoted header", bom + `"code",batch` + "\nAAA-1,b1\n", "AAA-1"},
		{"codes without header", bom + "AAA-1\nBBB-2", "AAA-1|BBB-2"},
		{"CSV codes without header", bom + "AAA-1,b1\nBBB-2,b1\n", "AAA-1|BBB-2"},
		{"blank lines before the header", bom + "\ncode\nAAA-1\n", "|AAA-1"},
		{"only the first mark", bom + bom + "AAA-1\n", bom + "AAA-1"},
		{"not on a later line", "AAA-1\n" + bom + "BBB-2\n", "AAA-1|" + bom + "BBB-2"},
		{"not after a blank line", "\n" + bom + "code\nAAA-1\n", "|" + bom + "code|AAA-1"},
	} {
		if got := strings.Join(collect(t, tc.in), "|"); got != tc.want {
			t.Errorf("%s: %q gave %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
	if got := collect(t, bom); len(got) != 0 {
		t.Errorf("a file of only a mark gave %q", got)
	}
	if got := collect(t, "\xef\xbb"); len(got) != 1 || got[0] != "\xef\xbb" {
		t.Errorf("a file of a partial mark gave %q", got)
	}
}

// TestLinesReadError: a read error ends the codes read so far with that
// error, also when it comes within the first bytes, where a mark is looked for.
func TestLinesReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, in := range []string{"", "A", "\xef\xbb", "\ufeff", "\ufeffAAA-1\nB"} {
		var got []string
		var err error
		for line, e := range Lines(io.MultiReader(strings.NewReader(in), iotest.ErrReader(boom))) {
			if e != nil {
				err = e
				continue
			}
			got = append(got, line)
		}
		want := strings.Split(strings.TrimPrefix(in, "\ufeff"), "\n")
		if want[0] == "" && len(want) == 1 {
			want = nil
		}
		if !errors.Is(err, boom) || strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("%q then an error: %q, %v; want %q, %v", in, got, err, want, boom)
		}
	}
}
