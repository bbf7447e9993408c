package domain

import (
	"context"
	"iter"
)

// ImportCodesInput names a batch of codes for a CODES SKU at a location.
// (SKU, BatchRef) identifies the batch: importing it again changes nothing
// and returns the first import's counts.
type ImportCodesInput struct {
	SKU      string
	Location string
	BatchRef string
}

// Validate checks the input before anything is read or written.
func (in ImportCodesInput) Validate() error {
	if err := checkSKUAndLocation(in.SKU, in.Location); err != nil {
		return err
	}
	return CheckIdentifier([]string{"input", "batchRef"}, in.BatchRef)
}

// CodeBatch is the outcome of one import. Received counts non-header lines;
// each is inserted, a duplicate (within the file or of a stored code), or
// rejected (blank or malformed).
type CodeBatch struct {
	BatchRef        string
	Received        int
	Inserted        int
	Duplicates      int
	Rejected        int
	PreordersFilled int
}

// MaxImportLines bounds one import, so one request cannot hold a transaction
// open indefinitely.
const MaxImportLines = 1_000_000

// SetPreorderInput sets how many units are expected from a supplier at a
// balance; reserve may sell against it.
type SetPreorderInput struct {
	SKU           string
	Location      string
	PendingSupply int
}

// Validate checks the input.
func (in SetPreorderInput) Validate() error {
	if err := checkSKUAndLocation(in.SKU, in.Location); err != nil {
		return err
	}
	if in.PendingSupply < 0 || in.PendingSupply > MaxQuantity {
		return InvalidInput([]string{"input", "pendingSupply"}, "pendingSupply must be between 0 and %d", MaxQuantity)
	}
	return nil
}

// Codes imports and reveals unit codes. Implemented by store.Store.
type Codes interface {
	// CodesImport stocks the codes lines yields (one code each; blank or
	// malformed ones are counted as rejected). An error from lines aborts the
	// import and changes nothing.
	CodesImport(ctx context.Context, in ImportCodesInput, lines iter.Seq2[string, error]) (CodeBatch, error)
	// CodesReveal returns the plaintext codes sold on an order line, and
	// records that they were shown to the caller. Outside scope: NOT_FOUND.
	CodesReveal(ctx context.Context, scope Scope, orderLineID int64) ([]string, error)
}
