package codefile

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"inventory/codecrypt"
)

// parse runs Lines over data and returns the fields it yielded and the error
// it ended with, checking that an error, if any, came last and alone.
func parse(t *testing.T, data []byte) (fields []string, err error) {
	t.Helper()
	for field, e := range Lines(bytes.NewReader(data)) {
		if err != nil {
			t.Fatalf("Lines yielded %q after the error %v", field, err)
		}
		if e != nil {
			if field != "" {
				t.Fatalf("Lines yielded the field %q with the error %v", field, e)
			}
			err = e
			continue
		}
		fields = append(fields, field)
	}
	return fields, err
}

// physicalLines splits data as bufio.ScanLines does: on "\n", without a
// trailing empty line, with one trailing "\r" dropped from each line.
func physicalLines(data []byte) []string {
	s := string(data)
	if s == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// utf8BOM is the byte order mark Lines drops from the very start of a file.
const utf8BOM = "\xef\xbb\xbf"

// FuzzLines: for any input, Lines never panics and reads it less one byte
// order mark at its very start (a mark anywhere else is data): it fails the
// file only for a line of more than MaxLineBytes (and then as its last word),
// and otherwise
// yields exactly one field per line, less one when the first non-blank field
// is the "code" header. A line without a comma or quote is yielded as it is;
// any other field is no longer than its line and has no newline, or is
// the malformed-line marker that codecrypt.Clean rejects. What Clean accepts
// of a field is the field trimmed, non-empty, valid UTF-8, printable, at most
// codecrypt.MaxCodeLength characters.
func FuzzLines(f *testing.F) {
	for _, s := range []string{
		"", "\n", "\r\n", "AAA-1\nAAA-2\n", "code\nAAA-1", "CODE,batch\r\nAAA-1,b1\r\n", `"code"` + "\nX",
		"\n\n  code  \nX\n", "code\ncode\n", "X\ncode\n", "code,batch\nAAA-1,b1\r\n\"BB,2\",x\n\nCCC\n",
		`"unterminated` + "\n", `a"b,c`, `"a""b",c`, `,,,`, "\"\n\"", "tab\tcode\n", "\x00\x01\x7f\n",
		"\xff\xfe\n", "\ufeffcode\nX\n", "bare\rcr\n", strings.Repeat("y", 200) + "\n",
		"  spaced code  \n", "ÄÖÜ-€\n", "a\r\r\n",
		"\ufeff", "\xef\xbb", "\ufeff\ufeffcode\nX\n", "\ufeffX\nY\n", "X\n\ufeffcode\n", "\n\ufeffcode\nX\n",
		"\ufeff\"code\",batch\r\nX,b\r\n", "\ufeff\n\ncode\nX",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(strings.Repeat("x", MaxLineBytes+1)))
	f.Add([]byte("ok\n" + strings.Repeat(",", MaxLineBytes-1) + "\nafter\n"))
	f.Add([]byte(utf8BOM + strings.Repeat("x", MaxLineBytes) + "\n"))
	f.Add([]byte(utf8BOM + strings.Repeat("x", MaxLineBytes+1) + "\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := parse(t, data)
		lines := physicalLines(bytes.TrimPrefix(data, []byte(utf8BOM)))
		longest := 0
		for _, l := range lines {
			longest = max(longest, len(l))
		}
		if err != nil {
			if longest < MaxLineBytes {
				t.Fatalf("error %v for a file whose longest line has %d bytes", err, longest)
			}
			if len(err.Error()) > 100 {
				t.Fatalf("error %q is not a short description", err)
			}
			return
		}
		if longest > MaxLineBytes {
			t.Fatalf("a %d-byte line was accepted", longest)
		}

		// One field per line, less the header.
		header := -1
		for i, l := range lines {
			if first := strings.TrimSpace(fieldOf(l)); first != "" {
				if strings.EqualFold(first, "code") {
					header = i
				}
				break
			}
		}
		want := len(lines)
		if header >= 0 {
			want--
		}
		if len(fields) != want {
			t.Fatalf("%d fields for %d lines (header at %d): %q", len(fields), len(lines), header, fields)
		}

		j := 0
		for i, line := range lines {
			if i == header {
				continue
			}
			field := fields[j]
			j++
			switch {
			case !strings.ContainsAny(line, `,"`):
				if field != line {
					t.Fatalf("plain line %q yielded %q", line, field)
				}
			case field == line+"\x00":
				if _, err := codecrypt.Clean(field); err == nil {
					t.Fatalf("the malformed-line marker for %q is accepted by Clean", line)
				}
			case len(field) > len(line) || strings.Contains(field, "\n"):
				t.Fatalf("CSV line %q yielded %q", line, field)
			}
			code, err := codecrypt.Clean(field)
			if err != nil {
				continue
			}
			if code != strings.TrimSpace(field) || code == "" || !utf8.ValidString(code) ||
				utf8.RuneCountInString(code) > codecrypt.MaxCodeLength || strings.ContainsFunc(code, func(r rune) bool { return !unicode.IsPrint(r) }) ||
				codecrypt.Normalize(code) == "" {
				t.Fatalf("Clean(%q) accepted %q", field, code)
			}
		}
	})
}

// fieldOf is the oracle's view of a line's first field, for header detection
// only: the first CSV field when the line parses as CSV, else the line.
func fieldOf(line string) string {
	if !strings.ContainsAny(line, `,"`) {
		return line
	}
	rec, err := csv.NewReader(strings.NewReader(line)).Read()
	if err != nil || len(rec) == 0 {
		return line
	}
	return rec[0]
}

// FuzzLinesRoundTrip: codes that codecrypt.Clean accepts, written under a
// "code" header one per line (plain, when they hold no comma or quote) or as
// the first column of a CSV file (with encoding/csv, LF or CRLF), with or
// without a byte order mark first (as Excel writes CSV), are read back by
// Lines in order, each exactly as Clean stores it.
func FuzzLinesRoundTrip(f *testing.F) {
	f.Add("GC25-AAAA-0001\nGC25-AAAA-0002", false, false, false)
	f.Add("GC25-AAAA-0001\nGC25-AAAA-0002", true, true, false)
	f.Add("code\nCODE\nCode", false, false, false)
	f.Add("a,b\n\"quoted\"\nx\"y", true, false, false)
	f.Add("  padded  \nÄÖÜ €\n日本語-コード", true, false, false)
	f.Add("\\.\n#comment\n-", true, true, false)
	f.Add("a\x00b\n\xff\n"+strings.Repeat("z", codecrypt.MaxCodeLength+1), false, true, false)
	f.Add("GC25-AAAA-0001\nGC25-AAAA-0002", true, true, true)
	f.Add("GC25-AAAA-0001\nGC25-AAAA-0002", false, false, true)
	f.Add("\ufeffcode\n\ufeffX", false, false, true)
	f.Add("\ufeffa,b\n\"q\"", true, false, true)

	f.Fuzz(func(t *testing.T, blob string, asCSV, crlf, bom bool) {
		var codes []string
		for _, candidate := range strings.Split(blob, "\n") {
			code, err := codecrypt.Clean(candidate)
			if err != nil || (!asCSV && strings.ContainsAny(code, `,"`)) {
				continue
			}
			codes = append(codes, code)
		}

		var file bytes.Buffer
		if bom {
			file.WriteString(utf8BOM)
		}
		eol := "\n"
		if crlf {
			eol = "\r\n"
		}
		if asCSV {
			w := csv.NewWriter(&file)
			w.UseCRLF = crlf
			if err := w.Write([]string{"code", "batch"}); err != nil {
				t.Fatal(err)
			}
			for _, c := range codes {
				if err := w.Write([]string{c, "b1"}); err != nil {
					t.Fatal(err)
				}
			}
			w.Flush()
			if err := w.Error(); err != nil {
				t.Fatal(err)
			}
		} else {
			file.WriteString("code" + eol)
			for _, c := range codes {
				file.WriteString(c + eol)
			}
		}

		fields, err := parse(t, file.Bytes())
		if err != nil {
			t.Fatalf("Lines(%q): %v", file.String(), err)
		}
		if len(fields) != len(codes) {
			t.Fatalf("wrote %d codes, read %d fields: %q from %q", len(codes), len(fields), fields, file.String())
		}
		for i, field := range fields {
			got, err := codecrypt.Clean(field)
			if err != nil || got != codes[i] {
				t.Fatalf("code %d: wrote %q, read %q (Clean: %q, %v)", i, codes[i], field, got, err)
			}
		}
	})
}
