package domain

import "fmt"

// MaxStockLevels bounds one setStockLevels call (and one chunk of a CSV
// stock import), so one call holds its balance locks briefly.
const MaxStockLevels = 1000

// StockReasonSync is the ledger reason of a change made by setStockLevels.
const StockReasonSync = "stock_sync"

// StockLevel sets one balance's on-hand count. ExpectedOnHand, when set,
// makes it a compare-and-swap against a count the caller saw.
type StockLevel struct {
	SKU            string
	Location       string
	OnHand         int
	ExpectedOnHand *int
}

// Check validates one level; line is its index in the call, for the error.
func (l StockLevel) Check(line int) *Error {
	field := func(name string) []string { return []string{"input", "levels", fmt.Sprint(line), name} }
	err := CheckIdentifier(field("sku"), l.SKU)
	if err == nil {
		err = CheckIdentifier(field("location"), l.Location)
	}
	if err == nil && (l.OnHand < 0 || l.OnHand > MaxQuantity) {
		err = InvalidInput(field("onHand"), "onHand must be between 0 and %d, got %d", MaxQuantity, l.OnHand)
	}
	if err == nil && l.ExpectedOnHand != nil && (*l.ExpectedOnHand < 0 || *l.ExpectedOnHand > maxStoredQuantity) {
		err = InvalidInput(field("expectedOnHand"), "expectedOnHand must not be negative")
	}
	if err == nil {
		return nil
	}
	e := err.(*Error)
	e.Line = &line
	if CheckIdentifier(nil, l.SKU) == nil {
		e.SKU = l.SKU
	}
	return e
}

// SetStockLevelsInput sets on-hand counts for up to MaxStockLevels balances.
// Reference makes the call idempotent: the same reference with the same
// levels applies nothing again and answers the first outcome.
type SetStockLevelsInput struct {
	Reference string
	Levels    []StockLevel
}

// Validate checks what concerns the whole call; each level is checked on
// its own (StockLevel.Check), so one bad level refuses only itself.
func (in SetStockLevelsInput) Validate() error {
	if err := CheckText([]string{"input", "reference"}, in.Reference, MaxReferenceLength); err != nil {
		return err
	}
	if len(in.Levels) == 0 || len(in.Levels) > MaxStockLevels {
		return InvalidInput([]string{"input", "levels"}, "setStockLevels takes 1..%d levels per call, got %d", MaxStockLevels, len(in.Levels))
	}
	return nil
}

// StockLevelsResult is what a setStockLevels call did: each level was
// applied, found unchanged, or refused by one of Errors (whose Line is its
// index). Balances are the changed balances, after the change. Replayed is
// true when the reference had been used with the same levels before: then
// nothing was applied now and the rest is the first call's outcome.
type StockLevelsResult struct {
	Replayed  bool
	Applied   int
	Unchanged int
	Failed    int
	Balances  []Balance
	Errors    []Error
}
