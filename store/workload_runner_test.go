package store_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"inventory/domain"
)

// workloadOp is one kind of operation in a randomized concurrent workload.
// run returns the business refusal it met ("" if none) and fails only on
// something the operation may never answer.
type workloadOp struct {
	name   string
	weight int
	run    func(g, i int, rng *rand.Rand) (domain.ErrorCode, error)
}

// runWorkload runs opsEach operations, each drawn by weight, in each of
// goroutines goroutines with generators derived from seed (logged by the
// caller so a failure can be replayed). It counts, into ran and refused, how
// often each operation ran and met each refusal, and returns how long it all
// took. The first error fails the test.
func runWorkload(t *testing.T, seed uint64, goroutines, opsEach int, ops []workloadOp, mu *sync.Mutex, ran, refused map[string]int) time.Duration {
	t.Helper()
	totalWeight := 0
	for _, op := range ops {
		totalWeight += op.weight
	}
	started := time.Now()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for i := range opsEach {
				k := rng.IntN(totalWeight)
				op := ops[0]
				for _, o := range ops {
					if k < o.weight {
						op = o
						break
					}
					k -= o.weight
				}
				code, err := op.run(g, i, rng)
				mu.Lock()
				ran[op.name]++
				if code != "" {
					refused[op.name+" "+string(code)]++
				}
				mu.Unlock()
				if err != nil {
					t.Errorf("goroutine %d op %d (seed %d): %v", g, i, seed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return time.Since(started)
}
