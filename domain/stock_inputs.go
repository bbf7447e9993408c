package domain

// CreateLocationInput creates a location.
type CreateLocationInput struct {
	Code     string
	Name     string
	Priority int
	// Fulfillment is FulfillOnConfirm when empty.
	Fulfillment FulfillmentMode
}

// Validate checks the input before anything is written.
func (in CreateLocationInput) Validate() error {
	if err := CheckIdentifier([]string{"input", "code"}, in.Code); err != nil {
		return err
	}
	if err := CheckText([]string{"input", "name"}, in.Name, MaxNameLength); err != nil {
		return err
	}
	if in.Priority < -MaxPriority || in.Priority > MaxPriority {
		return InvalidInput([]string{"input", "priority"}, "priority must be between %d and %d", -MaxPriority, MaxPriority)
	}
	if in.Fulfillment != "" && !in.Fulfillment.Valid() {
		return InvalidInput([]string{"input", "fulfillment"}, "fulfillment must be ON_CONFIRM or ON_SHIPMENT")
	}
	return nil
}

// CreateSKUInput creates a SKU.
type CreateSKUInput struct {
	Code string
	Name string
	Kind StockKind
	// LowStockThreshold: none (each webhook endpoint's applies) when nil.
	LowStockThreshold *int
}

// Validate checks the input before anything is written.
func (in CreateSKUInput) Validate() error {
	if err := CheckIdentifier([]string{"input", "code"}, in.Code); err != nil {
		return err
	}
	if err := CheckText([]string{"input", "name"}, in.Name, MaxNameLength); err != nil {
		return err
	}
	if !in.Kind.Valid() {
		return InvalidInput([]string{"input", "kind"}, "kind must be QUANTITY or CODES")
	}
	return CheckLowStockThreshold([]string{"input", "lowStockThreshold"}, in.LowStockThreshold)
}

// ReceiveStockInput adds delivered stock to a balance.
type ReceiveStockInput struct {
	SKU       string
	Location  string
	Quantity  int
	Reference string
}

// Validate checks the input before anything is written.
func (in ReceiveStockInput) Validate() error {
	if err := checkSKUAndLocation(in.SKU, in.Location); err != nil {
		return err
	}
	if err := CheckQuantity([]string{"input", "quantity"}, in.Quantity); err != nil {
		return err
	}
	return CheckText([]string{"input", "reference"}, in.Reference, MaxReferenceLength)
}

// AdjustStockInput corrects on-hand stock by Delta. Reference is free text
// for the ledger (two adjustments under one reference are two adjustments).
// A caller that retries makes the retry safe one of two ways:
// ExpectedOnHand, a compare-and-swap against a count the caller saw, or
// RequestKey, which makes the call idempotent per (SKU, Location,
// RequestKey): nil applies every call.
type AdjustStockInput struct {
	SKU            string
	Location       string
	Delta          int
	Reason         string
	Reference      string
	ExpectedOnHand *int
	RequestKey     *string
}

// Validate checks the input before anything is written.
func (in AdjustStockInput) Validate() error {
	if err := checkSKUAndLocation(in.SKU, in.Location); err != nil {
		return err
	}
	if in.Delta == 0 {
		return InvalidInput([]string{"input", "delta"}, "delta must not be zero")
	}
	if in.Delta < -MaxQuantity || in.Delta > MaxQuantity {
		return InvalidInput([]string{"input", "delta"}, "delta must be between %d and %d", -MaxQuantity, MaxQuantity)
	}
	if err := CheckText([]string{"input", "reason"}, in.Reason, MaxReasonLength); err != nil {
		return err
	}
	if err := CheckText([]string{"input", "reference"}, in.Reference, MaxReferenceLength); err != nil {
		return err
	}
	if in.ExpectedOnHand != nil && (*in.ExpectedOnHand < 0 || *in.ExpectedOnHand > maxStoredQuantity) {
		return InvalidInput([]string{"input", "expectedOnHand"}, "expectedOnHand must not be negative")
	}
	if in.RequestKey != nil {
		return CheckIdentifier([]string{"input", "requestKey"}, *in.RequestKey)
	}
	return nil
}

// StockChange is what a receipt or an adjustment answers: the balance after
// it, and whether this call changed nothing because an earlier one with the
// same key (a receipt's reference, an adjustment's requestKey) already had —
// a caller that retried after a lost answer needs to know which happened.
type StockChange struct {
	Balance
	Replayed bool
}

func checkSKUAndLocation(sku, location string) error {
	if err := CheckIdentifier([]string{"input", "sku"}, sku); err != nil {
		return err
	}
	return CheckIdentifier([]string{"input", "location"}, location)
}

// AvailabilityQuery asks for the availability of SKUs, optionally limited to
// some locations.
type AvailabilityQuery struct {
	SKUs      []string
	Locations []string // nil: all locations
}

// Validate enforces the documented limits.
func (q AvailabilityQuery) Validate() error {
	if len(q.SKUs) > MaxAvailabilitySKUs {
		return Limitf("availability accepts at most %d SKUs per query, got %d", MaxAvailabilitySKUs, len(q.SKUs))
	}
	if len(q.Locations) > MaxAvailabilityFilter {
		return Limitf("availability accepts at most %d locations per query, got %d", MaxAvailabilityFilter, len(q.Locations))
	}
	for i, s := range q.SKUs {
		if err := CheckIdentifier([]string{"skus"}, s); err != nil {
			return Limitf("skus[%d]: %s", i, err.(*Error).Message)
		}
	}
	for i, l := range q.Locations {
		if err := CheckIdentifier([]string{"locations"}, l); err != nil {
			return Limitf("locations[%d]: %s", i, err.(*Error).Message)
		}
	}
	return nil
}
