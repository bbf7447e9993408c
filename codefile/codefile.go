// Package codefile reads the code files suppliers send: one code per line, or
// CSV whose first field is the code, with an optional "code" header line.
// Blank and malformed lines are passed on, to be counted as rejected; only an
// unreadable file is an error.
package codefile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
)

// MaxLineBytes bounds one line; a longer one aborts the import as malformed.
const MaxLineBytes = 64 << 10

// bom is the UTF-8 byte order mark (U+FEFF) that Excel and other Windows
// tools write at the start of a CSV file.
const bom = "\ufeff"

// Lines yields each code field of r in order. A byte order mark at the very
// start of the file is dropped (only there). The first non-blank line is
// skipped when it is a header ("code", any case, optionally quoted).
func Lines(r io.Reader) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		sc := bufio.NewScanner(skipBOM(r))
		sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
		first := true
		for sc.Scan() {
			field := firstField(sc.Text())
			if first && strings.TrimSpace(field) != "" {
				first = false
				if strings.EqualFold(strings.TrimSpace(field), "code") {
					continue
				}
			}
			if !yield(field, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("a line is longer than %d bytes", MaxLineBytes)
			}
			yield("", err)
		}
	}
}

// skipBOM returns r without a byte order mark at its very start. A file of
// fewer bytes than a mark, or a read error within them, reads as it would
// have: those bytes, then that error.
func skipBOM(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(bom))
	switch {
	case string(head) == bom:
		_, _ = br.Discard(len(bom))
	case err != nil:
		// Peek hands the error over: br would read r again after it.
		return io.MultiReader(bytes.NewReader(bytes.Clone(head)), errReader{err})
	}
	return br
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// List yields codes given one per element, as the GraphQL codes argument
// sends them.
func List(codes []string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for _, c := range codes {
			if !yield(c, nil) {
				return
			}
		}
	}
}

// firstField is the line itself, or its first CSV field when it has a comma
// or a quote. A line that is not valid CSV is returned whole, to be rejected
// as malformed.
func firstField(line string) string {
	if !strings.ContainsAny(line, `,"`) {
		return line
	}
	rec, err := csv.NewReader(strings.NewReader(line)).Read()
	if err != nil || len(rec) == 0 {
		return line + "\x00" // not printable: Clean rejects it
	}
	return rec[0]
}
