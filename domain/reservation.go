package domain

import "time"

// ReservationStatus is where a reservation is in its one-way life:
// HELD -> CONFIRMED | RELEASED | EXPIRED. The values are the GraphQL enum names.
type ReservationStatus string

const (
	StatusHeld      ReservationStatus = "HELD"
	StatusConfirmed ReservationStatus = "CONFIRMED"
	StatusReleased  ReservationStatus = "RELEASED"
	StatusExpired   ReservationStatus = "EXPIRED"
)

// ReleaseReason says why a hold was given back. The values are the GraphQL
// enum names.
type ReleaseReason string

const (
	ReasonPaymentFailed     ReleaseReason = "PAYMENT_FAILED"
	ReasonFraudRejected     ReleaseReason = "FRAUD_REJECTED"
	ReasonCustomerCancelled ReleaseReason = "CUSTOMER_CANCELLED"
	ReasonCheckoutAbandoned ReleaseReason = "CHECKOUT_ABANDONED"
	ReasonOther             ReleaseReason = "OTHER"
)

// Valid reports whether r is a known reason.
func (r ReleaseReason) Valid() bool {
	switch r {
	case ReasonPaymentFailed, ReasonFraudRejected, ReasonCustomerCancelled, ReasonCheckoutAbandoned, ReasonOther:
		return true
	}
	return false
}

// Reservation is a basket's hold on stock, named by (CheckoutID, RequestKey).
type Reservation struct {
	ID            string
	CheckoutID    string
	RequestKey    string
	Status        ReservationStatus
	ExpiresAt     time.Time
	CreatedAt     time.Time
	ReleaseReason *ReleaseReason
	Lines         []ReservationLine
	// Order is the order a confirm wrote, nil until then.
	Order *Order
}

// ReservationLine is stock held at one location. An input line without a
// location may become several lines, one per location it was sourced from;
// InputLine is the index of the input line it came from.
type ReservationLine struct {
	InputLine        int
	SKU              string
	Location         string
	Quantity         int
	PreorderQuantity int
}

// Order is written in the same transaction as the confirm that sells the stock.
type Order struct {
	Ref        string
	CheckoutID string
	CreatedAt  time.Time
	Lines      []OrderLine
}

// OrderLine is one sold reservation line with the snapshot the buyer saw.
// Codes are not loaded with the line: revealing them is a recorded act
// (Codes.CodesReveal), done only when a client asks for them.
type OrderLine struct {
	ID        int64 // internal: what CodesReveal takes
	Kind      StockKind
	SKU       string
	Location  string
	Quantity  int
	Title     *string
	UnitPrice *string
	Currency  *string
	// PendingCodes counts pre-ordered units not yet allocated.
	PendingCodes int
	// Committed is in hand for the order and not yet shipped, at an
	// ON_SHIPMENT location (what the balance's Committed counts); zero
	// elsewhere. Fulfilled and Cancelled are what shipped and what was
	// given back (FulfillOrder, CancelOrder).
	Committed, Fulfilled, Cancelled int
}

// Scope limits whose reservations and orders a call may see or change. The zero
// value is every checkout (service and admin); a checkout token gets its own.
type Scope struct {
	CheckoutID string
}

// Allows reports whether the scope covers checkoutID.
func (s Scope) Allows(checkoutID string) bool {
	return s.CheckoutID == "" || s.CheckoutID == checkoutID
}

// ReservationPage is one page of a checkout's reservations, newest first:
// First of them (1..MaxReservationPage), after the one with id After (nil:
// from the newest). A checkout's list grows without bound, so it is read in
// pages.
type ReservationPage struct {
	First int
	After *string
}

// MaxReservationPage bounds one page of a checkout's reservations.
const MaxReservationPage = 100

// OperationsSnapshot is what the metrics report at every scrape for alerts.
type OperationsSnapshot struct {
	HeldReservations int
	OverdueHolds     int     // held past their deadline: expiry is late
	RelayLagSeconds  float64 // how long the oldest committed event has waited to be published
	// UnshippedOrders have units committed at an ON_SHIPMENT location, not
	// yet fulfilled or cancelled; UnshippedUnits counts those units, and
	// OldestUnshippedSeconds is how long ago the oldest of those orders was
	// confirmed (0: none): a growing tail means the warehouse is behind.
	UnshippedOrders        int
	UnshippedUnits         int
	OldestUnshippedSeconds float64
}

// InventoryHealth is what on-call looks at first.
type InventoryHealth struct {
	HeldReservations int
	// OverdueHolds are held past their deadline: a few seconds' worth is
	// normal, a growing number means expiry is not running.
	OverdueHolds          int
	HeldByAge             []AgeBucket
	AllocationFailureRate float64 // OUT_OF_STOCK share of reserve attempts, last hour
	LastSweepReleased     *int
	LastSweepAt           *time.Time
	// The orders waiting to ship from ON_SHIPMENT locations: as in
	// OperationsSnapshot.
	UnshippedOrders        int
	UnshippedUnits         int
	OldestUnshippedSeconds float64
}

// AgeBucket counts held reservations at least MinAgeSeconds old (and younger
// than the next bucket).
type AgeBucket struct {
	Label         string
	MinAgeSeconds int
	Count         int
}
