// Package domain holds the inventory server's vocabulary: the stock model, the
// callers and what they may do, the error codes clients act on, and the limits
// every entry point enforces. It imports nothing of ours and no driver or
// transport, so every other package can share it without cycles.
package domain
