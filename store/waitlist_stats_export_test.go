package store

// The waitlist overview's statements, for their plan tests. Tests only.
const (
	WaitlistTotalsStatement = waitlistTotalsStatement
	WaitlistLinesStatement  = waitlistLinesStatement
)
