package auth

import (
	"context"
	"fmt"

	"inventory/domain"
)

// Action is something a caller may ask to do.
type Action string

// Actions, one per kind of capability in docs/api.md ("Auth").
const (
	ReadCatalog        Action = "read the catalog and availability"
	ManageCatalog      Action = "manage locations and SKUs"
	ManageStock        Action = "change stock"
	IssueCheckoutToken Action = "issue checkout tokens"
	ActOnCheckout      Action = "act on a checkout's reservations and orders"
	// ConfirmSale turns a hold into a sale. It follows a payment that only the
	// checkout backend can vouch for, so a checkout token (held by the
	// shopper's browser) never may: it could otherwise take goods, and reveal
	// codes, that nobody paid for.
	ConfirmSale Action = "confirm a reservation"
	// ShipOrders ships and cancels confirmed orders: the checkout backend's
	// or the warehouse's word, never a shopper's token.
	ShipOrders       Action = "ship and cancel orders"
	ReadStockEvents  Action = "read stock events"
	OperateInventory Action = "read inventory health and reconciliation"
	// ReadAlerting reads how the admin has set up alerting (an SKU's own
	// STOCK_LOW threshold): the shop's operations, not its catalog, so no
	// storefront or backend needs it.
	ReadAlerting Action = "read alerting settings"
)

// policy lists the roles allowed each action. ActOnCheckout is additionally
// scoped: a checkout token may act only on its own checkoutId.
var policy = map[Action][]domain.Role{
	ReadCatalog:        {domain.RoleAnonymous, domain.RoleCheckout, domain.RoleService, domain.RoleAdmin},
	ManageCatalog:      {domain.RoleAdmin},
	ManageStock:        {domain.RoleAdmin},
	IssueCheckoutToken: {domain.RoleService, domain.RoleAdmin},
	ActOnCheckout:      {domain.RoleCheckout, domain.RoleService, domain.RoleAdmin},
	ConfirmSale:        {domain.RoleService, domain.RoleAdmin},
	ShipOrders:         {domain.RoleService, domain.RoleAdmin},
	ReadStockEvents:    {domain.RoleAdmin},
	OperateInventory:   {domain.RoleAdmin},
	ReadAlerting:       {domain.RoleAdmin},
}

// Authorize returns nil when the context's actor may perform action, else an
// error wrapping domain.ErrUnauthenticated (no usable token) or
// domain.ErrForbidden (known caller, not allowed).
func Authorize(ctx context.Context, action Action) error {
	var checkoutID *string
	if action == ActOnCheckout {
		checkoutID = new(string) // names no checkout, so no checkout token passes
	}
	return authorize(domain.ActorFrom(ctx), action, checkoutID)
}

// AuthorizeCheckout is Authorize for actions on one checkout's data: a checkout
// token passes only for its own checkoutID.
func AuthorizeCheckout(ctx context.Context, action Action, checkoutID string) error {
	return authorize(domain.ActorFrom(ctx), action, &checkoutID)
}

// authorize checks the role, then, for a checkout token, the checkout: an
// action on a checkout's data (checkoutID != nil) must name the token's own.
func authorize(a domain.Actor, action Action, checkoutID *string) error {
	allowed := false
	for _, r := range policy[action] {
		allowed = allowed || r == a.Role
	}
	switch {
	case !allowed && a.Role == domain.RoleAnonymous:
		if a.TokenProblem != "" {
			return fmt.Errorf("%w: %s", domain.ErrUnauthenticated, a.TokenProblem)
		}
		return fmt.Errorf("%w: %s needs a token", domain.ErrUnauthenticated, action)
	case !allowed:
		return fmt.Errorf("%w: %s may not %s", domain.ErrForbidden, a.Name, action)
	case a.Role == domain.RoleCheckout && checkoutID != nil && *checkoutID != a.CheckoutID:
		return fmt.Errorf("%w: this checkout token is bound to another checkout", domain.ErrForbidden)
	}
	return nil
}

// ReservationScope says whose reservations and orders the caller may see or
// change by id: every checkout's for service and admin, its own for a checkout
// token. Anonymous callers get UNAUTHENTICATED.
func ReservationScope(ctx context.Context) (domain.Scope, error) {
	a := domain.ActorFrom(ctx)
	if err := authorize(a, ActOnCheckout, nil); err != nil {
		return domain.Scope{}, err
	}
	if a.Role == domain.RoleCheckout {
		return domain.Scope{CheckoutID: a.CheckoutID}, nil
	}
	return domain.Scope{}, nil
}
