package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"inventory/jobs"
)

// loopExpirer expires every job's own hold, and blocks each set until gate
// is closed, telling entered when one starts.
type loopExpirer struct {
	entered chan struct{}
	gate    chan struct{}
	mu      sync.Mutex
	sets    int
}

func (e *loopExpirer) ReservationExpire(context.Context, string) (*time.Time, bool, error) {
	return nil, true, nil
}

func (e *loopExpirer) ReservationExpireDue(context.Context, int) (int, error) {
	e.mu.Lock()
	e.sets++
	e.mu.Unlock()
	e.entered <- struct{}{}
	<-e.gate
	return 0, nil
}

func (e *loopExpirer) WaitlistExpire(context.Context, string) (*time.Time, bool, error) {
	return nil, false, nil
}

// Of six jobs that each expired their own hold at once, two (the default
// SetLoops) run sets; the other four finish without one. Once those two
// are done, the next job runs sets again.
func TestExpirySetLoopsAreBounded(t *testing.T) {
	t.Parallel()
	e := &loopExpirer{entered: make(chan struct{}, 10), gate: make(chan struct{})}
	w := &jobs.ExpiryWorker{Expirer: e}
	work := func(i int) error {
		return w.Work(context.Background(), &river.Job[jobs.ReservationExpiryArgs]{JobRow: &rivertype.JobRow{ID: int64(i), Kind: "reservation_expiry"},
			Args: jobs.ReservationExpiryArgs{ReservationID: "r"}})
	}
	const jobCount = 6
	done := make(chan error, jobCount)
	for i := range jobCount {
		go func() { done <- work(i) }()
	}
	timeout := time.After(10 * time.Second)
	entered, returned := 0, 0
	for entered+returned < jobCount {
		select {
		case <-e.entered:
			entered++
		case err := <-done:
			if err != nil {
				t.Fatalf("a job without a set: %v", err)
			}
			returned++
		case <-timeout:
			t.Fatalf("after 10 s: %d jobs in sets, %d returned", entered, returned)
		}
	}
	if entered != 2 {
		t.Fatalf("%d jobs ran sets at once, want 2", entered)
	}
	close(e.gate)
	for range entered {
		if err := <-done; err != nil {
			t.Fatalf("a job in sets: %v", err)
		}
	}
	if err := work(jobCount); err != nil {
		t.Fatalf("the job after the loops ended: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sets != 3 {
		t.Fatalf("%d sets run, want 3 (two loops, then the next job's)", e.sets)
	}
}
