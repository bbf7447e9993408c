package resolvers

import (
	"sync"
	"time"
)

// dirtySet collects the keys that changed since it was last taken. Marking
// never blocks, so whoever reports changes (the event stream's goroutine)
// is never held up by whoever reads them: many changes to one key between
// two takes are one entry.
type dirtySet struct {
	mu   sync.Mutex
	keys map[string]struct{}
	// markedAt is when the latest mark since the last take was made: a
	// read sent after it sees every change the taken keys stand for.
	markedAt time.Time
}

// mark records that key changed.
func (d *dirtySet) mark(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.keys == nil {
		d.keys = map[string]struct{}{}
	}
	d.keys[key] = struct{}{}
	d.markedAt = time.Now()
}

// take returns the changed keys in order's order and when the latest of
// their marks was made, and forgets them.
func (d *dirtySet) take(order []string) ([]string, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.keys) == 0 {
		return nil, time.Time{}
	}
	out := make([]string, 0, len(d.keys))
	for _, k := range order {
		if _, ok := d.keys[k]; ok {
			out = append(out, k)
		}
	}
	d.keys = nil
	return out, d.markedAt
}

// latest is a queue of values to send holding at most one per key: putting
// a key that is already queued replaces its value in place, so a reader
// that falls behind is sent each key's newest value once, never a backlog.
// Not safe for concurrent use: one subscription's goroutine owns it.
type latest[V any] struct {
	order  []string
	values map[string]V
}

// put queues v for key, or replaces the value queued for it.
func (l *latest[V]) put(key string, v V) {
	if l.values == nil {
		l.values = map[string]V{}
	}
	if _, queued := l.values[key]; !queued {
		l.order = append(l.order, key)
	}
	l.values[key] = v
}

// peek is the oldest queued key's value.
func (l *latest[V]) peek() (V, bool) {
	if len(l.order) == 0 {
		var zero V
		return zero, false
	}
	return l.values[l.order[0]], true
}

// pop removes what peek returned.
func (l *latest[V]) pop() {
	if len(l.order) == 0 {
		return
	}
	delete(l.values, l.order[0])
	l.order = l.order[1:]
}
