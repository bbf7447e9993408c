package resolvers

import (
	"inventory/domain"
	"inventory/graph/model"
)

// orderQuantities maps a fulfil's or cancel's lines; nil (omitted) stays nil:
// the whole order.
func orderQuantities(lines []model.OrderQuantityInput) []domain.OrderQuantity {
	if lines == nil {
		return nil
	}
	out := make([]domain.OrderQuantity, len(lines))
	for i, l := range lines {
		out[i] = domain.OrderQuantity{SKU: l.Sku, Location: l.Location, Quantity: l.Quantity}
	}
	return out
}

func orderPayload(c *domain.OrderChange, ue []model.UserError) *model.OrderPayload {
	if c == nil {
		return &model.OrderPayload{UserErrors: ue}
	}
	return &model.OrderPayload{Order: &c.Order, Replayed: c.Replayed, UserErrors: ue}
}
