package domain

import "context"

// Catalog manages locations and SKUs. Implemented by store.Store.
type Catalog interface {
	LocationCreate(ctx context.Context, in CreateLocationInput) (Location, error)
	LocationList(ctx context.Context) ([]Location, error)
	SKUCreate(ctx context.Context, in CreateSKUInput) (SKU, error)
	// SKUGetByCode returns nil, nil for an unknown code.
	SKUGetByCode(ctx context.Context, code string) (*SKU, error)
}

// Stock changes and reads balances. Every change writes its ledger row in the
// same transaction. Implemented by store.Store.
type Stock interface {
	StockReceive(ctx context.Context, in ReceiveStockInput) (Balance, error)
	StockAdjust(ctx context.Context, in AdjustStockInput) (Balance, error)
	// AvailabilityList answers in request order, with nil for unknown SKUs.
	AvailabilityList(ctx context.Context, q AvailabilityQuery) ([]*Availability, error)
}
