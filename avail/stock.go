package avail

import (
	"context"

	"inventory/domain"
)

// Stock is domain.Stock with AvailabilityList answered from the copy when
// it can (loaded, within MaxLag, every code known) and from the database
// otherwise. Everything else, and every authoritative read, goes to the
// database.
type Stock struct {
	domain.Stock
	Copy *Copy // nil: always the database
}

// AvailabilityList implements domain.Stock; it notes the answer's seq (see
// domain.NoteAnswerSeq) when the copy answered.
func (s Stock) AvailabilityList(ctx context.Context, q domain.AvailabilityQuery) ([]*domain.Availability, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if s.Copy != nil {
		if out, seq, deps, ok := s.Copy.GetWithDeps(q); ok {
			domain.NoteAnswerSeq(ctx, seq)
			domain.NoteAnswerDeps(ctx, deps)
			return out, nil
		}
	}
	domain.NoteUnsequenced(ctx)
	return s.Stock.AvailabilityList(ctx, q)
}
