package store_test

import (
	"strings"
	"testing"

	"inventory/domain"
)

// idSpellings are the spellings of a reservation id the API accepts (any
// uuid.Parse takes), each of which must name the same reservation in every
// transition.
func idSpellings(id string) map[string]string {
	return map[string]string{
		"canonical":  id,
		"upper case": strings.ToUpper(id),
		"urn:uuid:":  "urn:uuid:" + id,
		"URN:UUID:":  "URN:UUID:" + strings.ToUpper(id),
		"braced":     "{" + id + "}",
		"no hyphens": strings.ReplaceAll(id, "-", ""),
	}
}

// TestReservationIDSpellingsInTransitions: a transition locks the row by the
// canonical id, and must go on with it; with the raw spelling an in-scope
// release, an extend and a confirm replay of a urn:uuid: id were INTERNAL
// (PostgreSQL does not read urn:uuid:). Each transition, in scope and
// unscoped, with each spelling.
func TestReservationIDSpellingsInTransitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mustLocation(t, b, "AMS", 1)
	mustSKU(t, b, "HP", domain.KindQuantity)
	mustReceive(t, b, "HP", "AMS", 100)
	ams := "AMS"
	n := 0
	for _, scoped := range []bool{false, true} {
		for name := range idSpellings("00000000-0000-0000-0000-000000000000") {
			n++
			checkout := "cart-" + strings.ReplaceAll(name, " ", "-")
			scope := domain.Scope{}
			if scoped {
				scope.CheckoutID = checkout
			}
			what := name
			if scoped {
				what += " in scope"
			}
			// release
			res := b.reserve(t, checkout, "r"+what, "HP", &ams, 1, 600)
			id := idSpellings(res.ID)[name]
			got, err := b.Store.ReservationRelease(b.Ctx, scope, domain.ReleaseInput{ID: id, Reason: domain.ReasonOther})
			if err != nil || got.ID != res.ID || got.Status != domain.StatusReleased {
				t.Errorf("release by %s id: %+v, %v", what, got, err)
			}
			if got, err := b.Store.ReservationRelease(b.Ctx, scope, domain.ReleaseInput{ID: id, Reason: domain.ReasonOther}); err != nil || got.Status != domain.StatusReleased {
				t.Errorf("release again by %s id: %+v, %v", what, got, err)
			}
			// extend, then confirm and confirm again (the replay)
			res = b.reserve(t, checkout, "c"+what, "HP", &ams, 1, 600)
			id = idSpellings(res.ID)[name]
			got, err = b.Store.ReservationExtend(b.Ctx, scope, domain.ExtendInput{ID: id, TTLSeconds: 900})
			if err != nil || got.ID != res.ID || !got.ExpiresAt.After(res.ExpiresAt) {
				t.Errorf("extend by %s id: %+v, %v", what, got, err)
			}
			ref := "ORD-" + strings.ReplaceAll(what, " ", "-")
			for _, attempt := range []string{"confirm", "confirm replay"} {
				got, err = b.Store.ReservationConfirm(b.Ctx, scope, domain.ConfirmInput{ID: id, OrderRef: ref})
				if err != nil || got.ID != res.ID || got.Status != domain.StatusConfirmed {
					t.Errorf("%s by %s id: %+v, %v", attempt, what, got, err)
				}
			}
			// a confirmed hold refuses release and extend as such, not as INTERNAL
			_, err = b.Store.ReservationRelease(b.Ctx, scope, domain.ReleaseInput{ID: id, Reason: domain.ReasonOther})
			if e, ok := domain.AsError(err); !ok || e.Code != domain.CodeInvalidTransition {
				t.Errorf("release of a confirmed hold by %s id: %v", what, err)
			}
		}
	}
	if got := b.sqlInt(t, `SELECT count(*) FROM orders`); got != n {
		t.Errorf("%d orders, want %d", got, n)
	}
	b.requireInvariants(t)
}
