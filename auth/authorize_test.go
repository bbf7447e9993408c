package auth

import (
	"context"
	"errors"
	"testing"

	"inventory/domain"
)

func TestAuthorizeMatrix(t *testing.T) {
	t.Parallel()
	anon := domain.Anonymous
	badToken := domain.Anonymous
	badToken.TokenProblem = "checkout token expired"
	checkout := domain.Actor{Role: domain.RoleCheckout, Name: "checkout:A", CheckoutID: "A"}
	service := domain.Actor{Role: domain.RoleService, Name: "backend"}
	admin := domain.Actor{Role: domain.RoleAdmin, Name: "ops"}

	var (
		ok     error
		unauth = domain.ErrUnauthenticated
		forbid = domain.ErrForbidden
	)
	cases := []struct {
		action   Action
		checkout string
		want     map[string]error
	}{
		{ReadCatalog, "", map[string]error{"anon": ok, "checkout": ok, "service": ok, "admin": ok}},
		{ManageCatalog, "", map[string]error{"anon": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{ManageStock, "", map[string]error{"anon": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{IssueCheckoutToken, "", map[string]error{"anon": unauth, "checkout": forbid, "service": ok, "admin": ok}},
		{ActOnCheckout, "A", map[string]error{"anon": unauth, "checkout": ok, "service": ok, "admin": ok}},
		{ActOnCheckout, "B", map[string]error{"anon": unauth, "checkout": forbid, "service": ok, "admin": ok}},
		{ReadStockEvents, "", map[string]error{"anon": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{OperateInventory, "", map[string]error{"anon": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
		{ReadAlerting, "", map[string]error{"anon": unauth, "checkout": forbid, "service": forbid, "admin": ok}},
	}
	actors := map[string]domain.Actor{"anon": anon, "checkout": checkout, "service": service, "admin": admin}
	for _, c := range cases {
		for name, actor := range actors {
			ctx := domain.WithActor(context.Background(), actor)
			err := Authorize(ctx, c.action)
			if c.checkout != "" {
				err = AuthorizeCheckout(ctx, c.action, c.checkout)
			}
			want := c.want[name]
			if want == nil && err != nil || want != nil && !errors.Is(err, want) {
				t.Errorf("%s on %q (checkout %q): got %v, want %v", name, c.action, c.checkout, err, want)
			}
		}
	}
	// A rejected token says why when something needs it.
	err := Authorize(domain.WithActor(context.Background(), badToken), ManageStock)
	if !errors.Is(err, domain.ErrUnauthenticated) || err.Error() != "authentication required: checkout token expired" {
		t.Fatalf("got %v", err)
	}
	// A checkout-scoped action asked without a checkout never lets a checkout token through.
	if err := Authorize(domain.WithActor(context.Background(), checkout), ActOnCheckout); !errors.Is(err, domain.ErrForbidden) {
		t.Fatalf("got %v", err)
	}
	// Scopes: a checkout sees its own, service and admin everything.
	for actor, want := range map[domain.Actor]domain.Scope{checkout: {CheckoutID: "A"}, service: {}, admin: {}} {
		got, err := ReservationScope(domain.WithActor(context.Background(), actor))
		if err != nil || got != want {
			t.Fatalf("%s: scope %+v, %v", actor.Name, got, err)
		}
	}
	if _, err := ReservationScope(context.Background()); !errors.Is(err, domain.ErrUnauthenticated) {
		t.Fatalf("anonymous scope: %v", err)
	}
	// No actor in the context is anonymous.
	if err := Authorize(context.Background(), ManageStock); !errors.Is(err, domain.ErrUnauthenticated) {
		t.Fatalf("got %v", err)
	}
}
