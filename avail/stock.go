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

// Catalog is domain.Catalog that tells the copy of the SKUs and locations
// this instance creates, so that this instance never answers a SKU it
// just created as unknown: the copy answers null for codes that did not
// exist as of a catalog check within MaxLag, and a SKU created since then
// (creating one makes no stock event) would otherwise read null here until
// the next check; the database answers it until the copy knows it. Other
// instances learn it at their next check, within their bound.
type Catalog struct {
	domain.Catalog
	Copy *Copy // nil: nothing to tell
}

// SKUCreate implements domain.Catalog.
func (c Catalog) SKUCreate(ctx context.Context, in domain.CreateSKUInput) (domain.SKU, error) {
	sku, err := c.Catalog.SKUCreate(ctx, in)
	if err == nil && c.Copy != nil {
		c.Copy.createdSKU(sku.Code)
	}
	return sku, err
}

// LocationCreate implements domain.Catalog.
func (c Catalog) LocationCreate(ctx context.Context, in domain.CreateLocationInput) (domain.Location, error) {
	loc, err := c.Catalog.LocationCreate(ctx, in)
	if err == nil && c.Copy != nil {
		c.Copy.learnLocation(loc.Code, loc.Priority)
	}
	return loc, err
}
