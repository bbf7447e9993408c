package resolvers

import (
	"strconv"
	"time"

	"github.com/google/uuid"

	"inventory/cursor"
	"inventory/domain"
	"inventory/graph/model"
)

// The Relay connections (docs/api-paging.md): each reads one keyset page
// from the store and gives every edge a signed cursor of its row's keyset
// position, bound to the list's kind and scope. An after cursor is opened
// here, before the store is asked anything: one this server did not sign
// for the same list and scope is INVALID_CURSOR and reads nothing.

// The kinds of list, each signed into its cursors.
const (
	listReservations   = "checkoutReservations"
	listBalances       = "balances"
	listDeliveries     = "webhookDeliveries"
	listReconciliation = "reconciliation"
	listWaitlistLines  = "waitlistLines"
)

// Cursors signs and opens connection cursors; cursor.Signer is one.
type Cursors interface {
	Sign(list cursor.List, fields ...string) string
	Open(c string, list cursor.List, n int) ([]string, error)
}

// openAfter opens a connection's after argument as n keyset fields of list;
// nil (null or "": the first page) when there is none.
func (r *Resolver) openAfter(after *string, list cursor.List, n int) ([]string, error) {
	if after == nil || *after == "" {
		return nil, nil
	}
	fields, err := r.Cursors.Open(*after, list, n)
	if err != nil {
		return nil, domain.InvalidCursor()
	}
	return fields, nil
}

// connect makes a page's edges, each with the cursor of its row's key, and
// its PageInfo: forward paging only, so never a previous page.
func connect[T, E any](r *Resolver, list cursor.List, page domain.Page[T], key func(*T) []string, edge func(*T, string) E) ([]E, *model.PageInfo) {
	edges := make([]E, len(page.Items))
	info := &model.PageInfo{HasNextPage: page.More}
	for i := range page.Items {
		c := r.Cursors.Sign(list, key(&page.Items[i])...)
		edges[i] = edge(&page.Items[i], c)
		if i == 0 {
			info.StartCursor = &c
		}
		info.EndCursor = &c
	}
	return edges, info
}

// endpointScope is the scope of an endpoint's delivery log: its id in one
// spelling, so each spelling of a UUID pages the same list.
func endpointScope(id string) string {
	if u, err := uuid.Parse(id); err == nil {
		return u.String()
	}
	return id
}

// Keyset fields. Each list's cursor carries its key whole; a signed cursor
// whose fields do not parse was signed by a server that wrote them
// otherwise, and is refused like any other.

func reservationFields(r *domain.Reservation) []string {
	return []string{strconv.FormatInt(r.CreatedAt.UnixMicro(), 10), r.ID}
}

func reservationKey(f []string) (*domain.ReservationKey, error) {
	if f == nil {
		return nil, nil
	}
	us, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return nil, domain.InvalidCursor()
	}
	return &domain.ReservationKey{CreatedAt: time.UnixMicro(us), ID: f[1]}, nil
}

func balanceFields(b *domain.Balance) []string { return []string{b.SKU, b.Location} }

func balanceKey(f []string) *domain.BalanceKey {
	if f == nil {
		return nil
	}
	return &domain.BalanceKey{SKU: f[0], Location: f[1]}
}

func deliveryFields(d *domain.WebhookDelivery) []string {
	return []string{strconv.FormatInt(d.ID, 10)}
}

func deliveryKey(f []string) (int64, error) {
	if f == nil {
		return 0, nil
	}
	id, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || id < 1 {
		return 0, domain.InvalidCursor()
	}
	return id, nil
}

func issueFields(i *domain.ReconciliationIssue) []string {
	return []string{i.SKU, i.Location, i.Kind, i.Detail}
}

func issueKey(f []string) *domain.ReconciliationKey {
	if f == nil {
		return nil
	}
	return &domain.ReconciliationKey{SKU: f[0], Location: f[1], Kind: f[2], Detail: f[3]}
}

func waitlistLineFields(l *domain.WaitlistLine) []string {
	return []string{strconv.Itoa(l.Waiting), l.SKU}
}

func waitlistLineKey(f []string) (*domain.WaitlistLineKey, error) {
	if f == nil {
		return nil, nil
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return nil, domain.InvalidCursor()
	}
	return &domain.WaitlistLineKey{Waiting: n, SKU: f[1]}, nil
}
