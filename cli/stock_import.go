package cli

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"unicode/utf8"

	"inventory/domain"
	"inventory/store"
)

// stockImportShown is how many failures the summary lists.
const stockImportShown = 10

// stockImportFailure is a row that was not applied, by its file line.
type stockImportFailure struct {
	line    int
	code    domain.ErrorCode
	message string
}

// stockImport sets on-hand counts from a CSV file in chunks of
// domain.MaxStockLevels rows, one StockLevelsSet call (one transaction) per
// chunk, and fails when any row failed.
func stockImport(ctx context.Context, st *store.Store, file, reference string, stdout io.Writer) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if reference == "" {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		reference = filepath.Base(file) + "@" + hex.EncodeToString(h.Sum(nil))[:16]
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	ctx = domain.WithActor(ctx, domain.Actor{Role: domain.RoleAdmin, Name: "cli:stock-import"})
	start := time.Now()
	var rows, applied, unchanged, replayed, chunks int
	var failures []stockImportFailure
	var levels []domain.StockLevel
	var lines []int // file line of each level
	flush := func() error {
		if len(levels) == 0 {
			return nil
		}
		res, err := st.StockLevelsSet(ctx, domain.SetStockLevelsInput{Reference: fmt.Sprintf("%s-%d", reference, chunks), Levels: levels})
		if err != nil {
			return fmt.Errorf("rows from line %d: %w", lines[0], err)
		}
		chunks++
		if res.Replayed { // imported before: nothing applied now; its failures still stand
			replayed += len(levels) - res.Failed
		} else {
			applied, unchanged = applied+res.Applied, unchanged+res.Unchanged
		}
		for _, e := range res.Errors {
			line := 0
			if e.Line != nil && *e.Line < len(lines) {
				line = lines[*e.Line]
			}
			failures = append(failures, stockImportFailure{line, e.Code, e.Message})
		}
		levels, lines = levels[:0], lines[:0]
		return nil
	}
	rows, err = scanStockCSV(f, func(line int, level domain.StockLevel, err error) error {
		if err != nil {
			failures = append(failures, stockImportFailure{line, domain.CodeInvalidInput, err.Error()})
			return nil
		}
		levels, lines = append(levels, level), append(lines, line)
		if len(levels) == domain.MaxStockLevels {
			return flush()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stock import %s: rows %d, applied %d, unchanged %d, failed %d, already imported %d (%d chunks, %s)\n",
		filepath.Base(file), rows, applied, unchanged, len(failures), replayed, chunks, time.Since(start).Round(time.Millisecond))
	if len(failures) == 0 {
		return nil
	}
	// Malformed rows are found while reading, refused ones when their chunk is sent.
	slices.SortStableFunc(failures, func(a, b stockImportFailure) int { return cmp.Compare(a.line, b.line) })
	for _, fl := range failures[:min(len(failures), stockImportShown)] {
		fmt.Fprintf(stdout, "line %d: %s: %s\n", fl.line, fl.code, fl.message)
	}
	if len(failures) > stockImportShown {
		fmt.Fprintf(stdout, "… and %d more\n", len(failures)-stockImportShown)
	}
	return fmt.Errorf("%d of %d rows failed", len(failures), rows)
}

// scanStockCSV reads a stock-sync CSV (header sku,location,on_hand and an
// optional expected_on_hand, any case, fields trimmed) and calls row for
// each data row in file order, with its file line and either the level or
// why the row is malformed; a malformed row does not stop the scan. It
// returns the number of data rows, or the first error of the header, of the
// CSV itself, or of row. Nothing is bounded here but by the reader: the
// caller sends levels on in chunks as they come.
func scanStockCSV(src io.Reader, row func(line int, level domain.StockLevel, err error) error) (rows int, err error) {
	r := csv.NewReader(src)
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		return 0, fmt.Errorf("reading the header: %w", err)
	}
	columns := strings.ToLower(strings.Join(trimAll(header), ","))
	if columns != "sku,location,on_hand" && columns != "sku,location,on_hand,expected_on_hand" {
		return 0, fmt.Errorf("the header must be sku,location,on_hand[,expected_on_hand], got %s", quoteField(columns))
	}
	width := len(header) // header is reused by the next Read
	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		line, _ := r.FieldPos(0)
		rows++
		level, perr := parseStockLevel(trimAll(record), width)
		if err := row(line, level, perr); err != nil {
			return rows, err
		}
	}
}

// maxQuotedField bounds how much of a field an error message repeats: a
// malformed file can hold a field of any length, and the summary prints ten
// such messages.
const maxQuotedField = 40

// quoteField quotes a field in at most maxQuotedField bytes (plus the quotes),
// marking a cut.
func quoteField(f string) string {
	quoted := strconv.Quote(f)
	if len(quoted) <= maxQuotedField+2 {
		return quoted
	}
	// Quoting can make a field four times longer (every invalid byte becomes
	// \xNN), so the bound is on the quoted text: cut whole runes off the end
	// until the quoted prefix fits.
	prefix := f
	if len(prefix) > maxQuotedField {
		prefix = prefix[:maxQuotedField]
	}
	for len(prefix) > 0 {
		if quoted = strconv.Quote(prefix); len(quoted) <= maxQuotedField+2 {
			break
		}
		_, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
	}
	return strconv.Quote(prefix) + "…"
}

// parseStockLevel reads one CSV row of width columns (3 or 4).
func parseStockLevel(record []string, width int) (domain.StockLevel, error) {
	if len(record) != width {
		return domain.StockLevel{}, fmt.Errorf("want %d fields, got %d", width, len(record))
	}
	onHand, err := strconv.Atoi(record[2])
	if err != nil {
		return domain.StockLevel{}, fmt.Errorf("on_hand %s is not a whole number", quoteField(record[2]))
	}
	l := domain.StockLevel{SKU: record[0], Location: record[1], OnHand: onHand}
	if width == 4 && record[3] != "" {
		expected, err := strconv.Atoi(record[3])
		if err != nil {
			return domain.StockLevel{}, fmt.Errorf("expected_on_hand %s is not a whole number", quoteField(record[3]))
		}
		l.ExpectedOnHand = &expected
	}
	return l, nil
}

func trimAll(fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = strings.TrimSpace(f)
	}
	return out
}
