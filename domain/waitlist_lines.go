package domain

import (
	"context"
	"time"
)

// WaitlistLine is one SKU's line at a glance, for operators: how many wait,
// for how many units, and since when the one at the front has.
type WaitlistLine struct {
	SKU     string
	Waiting int
	Units   int
	// OldestJoinedAt is when the entry at the front of the line joined;
	// OldestWaitSeconds is how long ago that was, by the database's clock.
	OldestJoinedAt    time.Time
	OldestWaitSeconds int
}

// Waitlist overview limits: the /admin panel shows the DefaultWaitlistLines
// longest lines; no answer holds more than MaxWaitlistLines.
const (
	DefaultWaitlistLines = 20
	MaxWaitlistLines     = 100
)

// WaitlistOverview reads the longest lines, for the /admin waitlist panel.
// Implemented by store.Store.
type WaitlistOverview interface {
	// WaitlistLines returns the first (1..MaxWaitlistLines) SKUs by
	// entries waiting, most first (then by SKU code).
	WaitlistLines(ctx context.Context, first int) ([]WaitlistLine, error)
}
