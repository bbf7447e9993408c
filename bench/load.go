package main

import (
	"context"
	"math/bits"
	"sync"
	"time"
)

// histogram records latencies in microseconds in log-linear buckets (16 per
// power of two, about 6% wide), so a client can record millions of samples
// without allocating and percentiles stay cheap to merge and read.
type histogram struct {
	counts [64 * 16]uint64
	n      uint64
	sum    uint64
}

func bucketOf(us uint64) int {
	if us < 16 {
		return int(us)
	}
	l := bits.Len64(us) // >= 5
	return (l-4)*16 + int((us>>(l-5))&15)
}

// bucketValue is the upper edge of bucket i in microseconds.
func bucketValue(i int) float64 {
	if i < 16 {
		return float64(i)
	}
	l := i/16 + 4
	sub := uint64(i % 16)
	return float64((16 + sub + 1) << (l - 5))
}

func (h *histogram) record(d time.Duration) {
	us := uint64(max(d.Microseconds(), 0))
	h.counts[min(bucketOf(us), len(h.counts)-1)]++
	h.n++
	h.sum += us
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the q-quantile (0..1) in milliseconds, 0 without samples.
func (h *histogram) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= want {
			return bucketValue(i) / 1000
		}
	}
	return bucketValue(len(h.counts)-1) / 1000
}

// meanMs is the mean latency in milliseconds.
func (h *histogram) meanMs() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n) / 1000
}

// op is one closed-loop request of client c; it returns an error for a
// request that did not do what the scenario wanted (it is counted, not fatal).
type op func(ctx context.Context, c int) error

// loadResult is what one closed-loop run measured.
type loadResult struct {
	ok, failed int
	elapsed    time.Duration
	lat        histogram
	firstErr   error
}

func (r loadResult) opsPerSec() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ok) / r.elapsed.Seconds()
}

// closedLoop runs clients goroutines, each sending its next request as soon
// as the previous one answered, for d. Only successful requests that
// finished within the window count towards throughput and latency: a
// server that fails fast must not look fast. Requests are not cancelled at
// the deadline (that would only fill the server log with aborted
// transactions); the last one of each client just finishes uncounted.
func closedLoop(ctx context.Context, clients int, d time.Duration, fn op) loadResult {
	type part struct {
		ok, failed int
		lat        histogram
		err        error
	}
	parts := make([]part, clients)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			p := &parts[c]
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				err := fn(ctx, c)
				t1 := time.Now()
				if t1.After(deadline) || ctx.Err() != nil {
					return // finished outside the window: neither success nor failure
				}
				if err != nil {
					p.failed++
					if p.err == nil {
						p.err = err
					}
					continue
				}
				p.ok++
				p.lat.record(t1.Sub(t0))
			}
		})
	}
	wg.Wait()
	res := loadResult{elapsed: d}
	for i := range parts {
		res.ok += parts[i].ok
		res.failed += parts[i].failed
		res.lat.merge(&parts[i].lat)
		if res.firstErr == nil {
			res.firstErr = parts[i].err
		}
	}
	return res
}
