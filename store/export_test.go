package store

import (
	"context"

	"inventory/domain"
)

// SetBatchHook makes f run inside every reserve and confirm batch's
// transaction (see Store.batchHook); nil removes it. Tests only.
func (s *Store) SetBatchHook(f func(kind string, requests int)) {
	if f == nil {
		s.batchHook.Store(nil)
		return
	}
	s.batchHook.Store(&f)
}

// ReserveBatchInOrder runs one reserve batch of ins, in this order, as the
// coalescer would have taken them, and says how many it held. Tests only:
// the coalescer decides a batch's order by arrival, which a test cannot
// steer.
func (s *Store) ReserveBatchInOrder(ctx context.Context, ins []domain.ReserveInput) (held int, err error) {
	batch := make([]*queuedReserve, len(ins))
	for i, in := range ins {
		batch[i] = &queuedReserve{in: in, fp: fingerprint(in), actor: domain.ActorFrom(ctx).Name}
	}
	outcomes, err := s.reserveBatch(ctx, batch)
	for _, o := range outcomes {
		if o.route == routeHeld {
			held++
		}
	}
	return held, err
}

// ConfirmBatchInOrder runs one confirm batch of ins, in this order, and says
// how many it confirmed (the rest a confirm would then decide alone). Tests
// only, as ReserveBatchInOrder.
func (s *Store) ConfirmBatchInOrder(ctx context.Context, ins []domain.ConfirmInput) (confirmed int, err error) {
	batch := make([]*queuedConfirm, len(ins))
	for i, in := range ins {
		id, _ := canonicalUUID(in.ID)
		batch[i] = &queuedConfirm{in: in, id: id, actor: domain.ActorFrom(ctx)}
	}
	err = s.confirmBatch(ctx, batch)
	for _, q := range batch {
		if q.confirmed {
			confirmed++
		}
	}
	return confirmed, err
}

// OfferStatement is the statement every freeing path runs to offer units to
// waiting entries ($1 SKU ids, $2 location ids of the balances it offers
// from, $3 the actor, $4 the checkouts locked, $5 those that could not be),
// for tests that look at its plan. Tests only.
const OfferStatement = offerStatement

// ScopeStatement is the statement every freeing path runs first, to ask
// whether anyone waiting may fit ($1 SKU ids, $2 location ids, $3
// reservation ids freed). Tests only.
const ScopeStatement = scopeStatement

// CheckoutLockSpace is the first key of checkouts' advisory locks, for tests
// that hold one as a concurrent reserve would. Tests only.
const CheckoutLockSpace = checkoutLockSpace
