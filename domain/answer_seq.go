package domain

import (
	"context"
	"sync"
)

// AnswerSeq collects, over one request, the stock event seq that the
// answer reflects: readers that know exactly which events they reflect (the
// in-memory availability copy) note the highest seq of the balances they
// answered; any other read marks the answer unsequenced. The HTTP cache
// layer puts the seq into the ETag.
type AnswerSeq struct {
	mu          sync.Mutex
	seq         int64
	noted       bool
	unsequenced bool
	deps        []AnswerDep
}

// AnswerDep is one thing an answer from the in-memory copy read: a SKU at a
// version of its balances, in one load of the copy; or, Absent, a SKU the
// copy answered null for (unknown to a catalog it had checked recently),
// which holds while the copy still does not know it and its catalog is
// still that fresh.
type AnswerDep struct {
	SKU     string
	Version uint64
	Load    int64
	Absent  bool
}

// NoteAnswerDeps records what part of the answer read (see AnswerDep).
func NoteAnswerDeps(ctx context.Context, deps []AnswerDep) {
	if a, _ := ctx.Value(answerSeqKey{}).(*AnswerSeq); a != nil {
		a.mu.Lock()
		a.deps = append(a.deps, deps...)
		a.mu.Unlock()
	}
}

// Deps is everything noted by NoteAnswerDeps.
func (a *AnswerSeq) Deps() []AnswerDep {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deps
}

type answerSeqKey struct{}

// WithAnswerSeq returns ctx carrying a new AnswerSeq.
func WithAnswerSeq(ctx context.Context) (context.Context, *AnswerSeq) {
	a := &AnswerSeq{}
	return context.WithValue(ctx, answerSeqKey{}, a), a
}

// NoteAnswerSeq records that part of the answer reflects exactly the
// events through seq; a no-op without an AnswerSeq in ctx.
func NoteAnswerSeq(ctx context.Context, seq int64) {
	if a, _ := ctx.Value(answerSeqKey{}).(*AnswerSeq); a != nil {
		a.mu.Lock()
		a.seq, a.noted = max(a.seq, seq), true
		a.mu.Unlock()
	}
}

// NoteUnsequenced records that part of the answer was read some other way
// (the database): its seq is unknown.
func NoteUnsequenced(ctx context.Context) {
	if a, _ := ctx.Value(answerSeqKey{}).(*AnswerSeq); a != nil {
		a.mu.Lock()
		a.unsequenced = true
		a.mu.Unlock()
	}
}

// Seq is the highest seq noted, and whether the whole answer is sequenced
// (something was noted and nothing unsequenced).
func (a *AnswerSeq) Seq() (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seq, a.noted && !a.unsequenced
}

// AnswerSeqFrom returns ctx's AnswerSeq, nil without one.
func AnswerSeqFrom(ctx context.Context) *AnswerSeq {
	a, _ := ctx.Value(answerSeqKey{}).(*AnswerSeq)
	return a
}
