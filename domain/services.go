package domain

import "context"

// Catalog manages locations and SKUs. Implemented by store.Store.
type Catalog interface {
	LocationCreate(ctx context.Context, in CreateLocationInput) (Location, error)
	LocationList(ctx context.Context) ([]Location, error)
	SKUCreate(ctx context.Context, in CreateSKUInput) (SKU, error)
	// SKUGetByCode returns nil, nil for an unknown code.
	SKUGetByCode(ctx context.Context, code string) (*SKU, error)
	// SKULowStockThresholdSet sets (nil: clears) a SKU's own stock.low
	// threshold; UNKNOWN_SKU for an unknown SKU.
	SKULowStockThresholdSet(ctx context.Context, code string, threshold *int) (SKU, error)
}

// Stock changes and reads balances. Every change writes its ledger row in the
// same transaction. Implemented by store.Store.
type Stock interface {
	// StockReceive is idempotent per (SKU, Location, Reference): the
	// reference names one receipt, and the same receipt again is Replayed.
	StockReceive(ctx context.Context, in ReceiveStockInput) (StockChange, error)
	// StockAdjust applies every call, unless it carries a RequestKey: then
	// it is idempotent per (SKU, Location, RequestKey).
	StockAdjust(ctx context.Context, in AdjustStockInput) (StockChange, error)
	// AvailabilityList answers in request order, with nil for unknown SKUs.
	AvailabilityList(ctx context.Context, q AvailabilityQuery) ([]*Availability, error)
	// PreorderSet sets a balance's expected supply; never below what is
	// already pre-ordered against it.
	PreorderSet(ctx context.Context, in SetPreorderInput) (Balance, error)
	// BalanceList pages through every balance (by SKU, then location code)
	// after an opaque cursor ("" for the first page).
	BalanceList(ctx context.Context, after string, limit int) (BalancePage, error)
	// StockLevelsSet sets on-hand counts, each level atomically on its own:
	// valid levels apply even when others are refused (per-level Errors).
	StockLevelsSet(ctx context.Context, in SetStockLevelsInput) (StockLevelsResult, error)
}

// Waitlists is the fair queue for sold-out stock (DESIGN "Waitlists"): a
// checkout joins the line for a SKU, and every path that frees units offers
// them, in the same transaction, first-fit in join order as HELD
// reservations. Calls naming an entry take a Scope, as reservations do.
// Implemented by store.Store.
type Waitlists interface {
	// WaitlistJoin puts a checkout in line. replayed is true when
	// (CheckoutID, RequestKey) already named an entry with the same inputs;
	// that entry is returned in its current state.
	WaitlistJoin(ctx context.Context, in JoinWaitlistInput) (entry WaitlistEntry, replayed bool, err error)
	// WaitlistLeave ends a waiting entry (LEFT); an entry that already
	// ended is returned as it is.
	WaitlistLeave(ctx context.Context, scope Scope, id string) (WaitlistEntry, error)
	// WaitlistEntryGet returns nil, nil when the entry does not exist or is
	// outside scope.
	WaitlistEntryGet(ctx context.Context, scope Scope, id string) (*WaitlistEntry, error)
}

// Reservations is the hold lifecycle: reserve, confirm, release, extend and
// expire, each exactly once however often it is retried. Calls that name an
// existing reservation take a Scope: outside it the reservation does not exist
// (NOT_FOUND, or nil for reads). Implemented by store.Store.
type Reservations interface {
	// ReservationCreate reserves a whole basket or nothing. replayed is true when
	// (CheckoutID, RequestKey) already named a reservation with the same inputs;
	// that reservation is returned in its current state.
	ReservationCreate(ctx context.Context, in ReserveInput) (res Reservation, replayed bool, err error)
	ReservationConfirm(ctx context.Context, scope Scope, in ConfirmInput) (Reservation, error)
	ReservationRelease(ctx context.Context, scope Scope, in ReleaseInput) (Reservation, error)
	ReservationExtend(ctx context.Context, scope Scope, in ExtendInput) (Reservation, error)
	// ReservationGetByID returns nil, nil when the reservation does not exist
	// or is outside scope.
	ReservationGetByID(ctx context.Context, scope Scope, id string) (*Reservation, error)
	ReservationListByCheckout(ctx context.Context, checkoutID string, page ReservationPage) ([]Reservation, error)
	// OrderGetByRef returns nil, nil when the order does not exist or is
	// outside scope.
	OrderGetByRef(ctx context.Context, scope Scope, ref string) (*Order, error)
	InventoryHealthGet(ctx context.Context) (InventoryHealth, error)
}
