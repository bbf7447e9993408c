package domain

import "time"

// StockKind says how a SKU is counted. The values are the GraphQL enum names.
type StockKind string

const (
	// KindQuantity is a plain count per location (headphones in Amsterdam: 12).
	KindQuantity StockKind = "QUANTITY"
	// KindCodes is unit stock where each unit is a unique secret sold once.
	KindCodes StockKind = "CODES"
)

// Valid reports whether k is a known kind.
func (k StockKind) Valid() bool { return k == KindQuantity || k == KindCodes }

// Location is a place stock is held. Reserving a line without a location takes
// stock from locations in ascending Priority (then code) order.
type Location struct {
	Code        string
	Name        string
	Priority    int
	Fulfillment FulfillmentMode
}

// FulfillmentMode says when a location's sold units leave on_hand. The values
// are the GraphQL enum names.
type FulfillmentMode string

const (
	// FulfillOnConfirm takes the units off on_hand at confirm: a shop counter,
	// a digital code. The default, and the only mode before committed stock.
	FulfillOnConfirm FulfillmentMode = "ON_CONFIRM"
	// FulfillOnShipment moves them from reserved to committed at confirm, and
	// off on_hand only when FulfillOrder ships them: a warehouse whose WMS
	// counts physical stock until dispatch would otherwise sell them again.
	FulfillOnShipment FulfillmentMode = "ON_SHIPMENT"
)

// Valid reports whether m is a known mode.
func (m FulfillmentMode) Valid() bool { return m == FulfillOnConfirm || m == FulfillOnShipment }

// SKU is a sellable item, with its balances when read through SKUByCode.
type SKU struct {
	Code     string
	Name     string
	Kind     StockKind
	Balances []Balance
	// LowStockThreshold is the SKU's own stock.low threshold, for SKUs that
	// sell in other volumes than the rest; nil: each webhook endpoint's.
	LowStockThreshold *int
}

// Balance is the stock of one SKU at one location. Available is derived, never
// stored: the database enforces reserved + committed <= on_hand.
type Balance struct {
	SKU      string
	Location string
	OnHand   int // what is physically there
	Reserved int
	// Committed is sold and not yet shipped (ON_SHIPMENT locations only):
	// still on hand, never for sale.
	Committed     int
	PendingSupply int
	Preordered    int
	UpdatedAt     time.Time
}

// Available is what a new reservation could take now.
func (b Balance) Available() int { return b.OnHand - b.Reserved - b.Committed }

// PreorderAvailable is what could still be sold against expected supply.
func (b Balance) PreorderAvailable() int { return max(b.PendingSupply-b.Preordered, 0) }

// Availability sums a SKU's balances over the requested locations.
type Availability struct {
	SKU       string
	Locations []Balance
}

// OnHand sums on-hand stock over the locations.
func (a Availability) OnHand() int { return a.sum(func(b Balance) int { return b.OnHand }) }

// Reserved sums held stock over the locations.
func (a Availability) Reserved() int { return a.sum(func(b Balance) int { return b.Reserved }) }

// Committed sums sold, unshipped stock over the locations.
func (a Availability) Committed() int { return a.sum(func(b Balance) int { return b.Committed }) }

// Available sums what can be reserved now over the locations.
func (a Availability) Available() int { return a.sum(Balance.Available) }

// PreorderAvailable sums what can be pre-ordered over the locations.
func (a Availability) PreorderAvailable() int { return a.sum(Balance.PreorderAvailable) }

func (a Availability) sum(f func(Balance) int) int {
	total := 0
	for _, b := range a.Locations {
		total += f(b)
	}
	return total
}

// SeqBalance is a balance with the seq of the newest stock event on it (0
// when there is none, or it was pruned).
type SeqBalance struct {
	Balance
	Seq int64
}

// AvailabilitySnapshot is every balance, SKU and location as of stock
// event Seq, for an in-memory availability copy to start from. Lag is how
// long the oldest committed event not yet given a seq had waited then.
type AvailabilitySnapshot struct {
	Seq int64
	Lag time.Duration
	// At is the reader's clock just before the snapshot's transaction
	// began: every change committed before At is in it, so a copy that
	// installs it is At+Lag old, however long the read took. Zero when
	// that is not known (a standby's snapshot holds what the standby had
	// replayed, which may be older): the copy then counts itself stale
	// until a head read on the primary says it has caught up.
	At   time.Time
	SKUs []string
	// SKUMaxID is the newest SKU id among SKUs: a catalog check reads the
	// ones after it (AvailabilityCatalogSince).
	SKUMaxID  int64
	Locations []Location
	Balances  []SeqBalance
}

// CatalogChange is how the catalog differs from what an in-memory
// availability copy knows (see store.AvailabilityCatalogSince): SKUs is how
// many exist and MaxID the newest id; New the codes after the copy's newest
// id, or every code when Full (then the copy keeps those it lacks);
// Locations every location. At is the reader's clock before its
// transaction began: every SKU and location committed before At is in it.
type CatalogChange struct {
	At        time.Time
	SKUs      int
	MaxID     int64
	New       []string
	Full      bool
	Locations []Location
}
