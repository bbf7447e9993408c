package cli

import (
	"bytes"
	"encoding/csv"
	"strconv"
	"strings"
	"testing"

	"inventory/domain"
)

// FuzzStockCSV feeds the stock-sync CSV reader (inventory stock import)
// arbitrary files. It must never panic, and for every file:
//   - rows are reported in file order, each once, on a line past the header;
//   - a level it accepts has trimmed codes and the numbers its fields spell,
//     and written back as CSV reads back as the same level;
//   - an error message repeats at most maxQuotedField bytes of any field, so
//     a hostile file cannot make the summary print megabytes;
//   - validating the levels (StockLevel.Check, what the store does first)
//     does not panic either.
func FuzzStockCSV(f *testing.F) {
	for _, seed := range []string{
		"sku,location,on_hand\nHP,AMS,5\n",
		"SKU, Location ,ON_HAND,expected_on_hand\n HP , AMS , 5 , 4 \nHP,BER,0,\n",
		"sku,location,on_hand\nHP,AMS,-1\nHP,AMS,x\nHP,AMS\nHP,AMS,1,2\n",
		"sku,location,on_hand,expected_on_hand\n\"H,P\",\"A\"\"MS\",7,\n\"multi\nline\",AMS,1,1\n",
		"sku,location,on_hand\nHP,AMS,99999999999999999999\nHP,AMS,+3\nHP,AMS,0x10\n",
		"sku,location\nHP,AMS\n",
		"",
		"\n\n",
		"sku,location,on_hand\r\nHP,AMS,5\r\n",
		"sku,location,on_hand\n\"unterminated,AMS,5\n",
		"sku,location,on_hand\nHP,AMS," + strings.Repeat("9x", 500) + "\n",
		"\xef\xbb\xbfsku,location,on_hand\nHP,AMS,5\n",
		"sku,location,on_hand\n\xff\xfe,AMS,5\n",
		// Every invalid byte quotes as four: the bound is on the quoted text.
		"sku,location,on_hand\nHP,AMS," + strings.Repeat("\x8a", maxQuotedField) + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lastLine := 0
		calls := 0
		rows, err := scanStockCSV(bytes.NewReader(data), func(line int, level domain.StockLevel, perr error) error {
			calls++
			if line <= lastLine || line < 2 {
				t.Fatalf("row %d on line %d after line %d", calls, line, lastLine)
			}
			lastLine = line
			if perr != nil {
				if msg := perr.Error(); len(msg) > 2*maxQuotedField+100 {
					t.Fatalf("error message of %d bytes: %.200s…", len(msg), msg)
				}
				return nil
			}
			if level.SKU != strings.TrimSpace(level.SKU) || level.Location != strings.TrimSpace(level.Location) {
				t.Fatalf("untrimmed level %+v", level)
			}
			_ = level.Check(calls - 1)
			requireRoundTrip(t, level)
			return nil
		})
		if rows != calls {
			t.Fatalf("%d rows counted, %d reported", rows, calls)
		}
		if err != nil && len(err.Error()) > 2*maxQuotedField+200 {
			t.Fatalf("error message of %d bytes: %.200s…", len(err.Error()), err.Error())
		}
	})
}

// requireRoundTrip writes level as a one-row file and reads it back.
func requireRoundTrip(t *testing.T, level domain.StockLevel) {
	t.Helper()
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	expected := ""
	if level.ExpectedOnHand != nil {
		expected = strconv.Itoa(*level.ExpectedOnHand)
	}
	_ = w.Write([]string{"sku", "location", "on_hand", "expected_on_hand"})
	_ = w.Write([]string{level.SKU, level.Location, strconv.Itoa(level.OnHand), expected})
	w.Flush()
	var back []domain.StockLevel
	if _, err := scanStockCSV(&buf, func(_ int, l domain.StockLevel, perr error) error {
		if perr != nil {
			t.Fatalf("level %+v written back does not read: %v", level, perr)
		}
		back = append(back, l)
		return nil
	}); err != nil {
		t.Fatalf("level %+v written back: %v", level, err)
	}
	if len(back) != 1 || back[0].SKU != level.SKU || back[0].Location != level.Location || back[0].OnHand != level.OnHand ||
		(back[0].ExpectedOnHand == nil) != (level.ExpectedOnHand == nil) ||
		level.ExpectedOnHand != nil && *back[0].ExpectedOnHand != *level.ExpectedOnHand {
		t.Fatalf("level %+v read back as %+v", level, back)
	}
}
