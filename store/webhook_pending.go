package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
)

// WebhookTarget is what delivery needs of an endpoint.
type WebhookTarget struct {
	ID      string
	URL     string
	Secrets []string // the current secret, then the previous one during a rotation
	Paused  bool
	// Cursor is the seq delivered up to.
	Cursor            int64
	Topics            []domain.WebhookTopic
	LowStockThreshold int
}

// Has reports whether the endpoint subscribes to topic.
func (t WebhookTarget) Has(topic domain.WebhookTopic) bool {
	for _, x := range t.Topics {
		if x == topic {
			return true
		}
	}
	return false
}

// WebhookEvent is a published stock event as webhook delivery needs it.
type WebhookEvent struct {
	domain.StockEvent
	// PreviousAvailable is the balance's available before the change: that
	// after its previous event, 0 when it has none (a new balance), nil when
	// that is unknown (older events were pruned).
	PreviousAvailable *int
	// PreviousSeq is the seq of the balance's previous event, 0 when it has
	// none, nil when that is unknown (pruned): a consumer that tracks a
	// balance sees a gap when it differs from the last seq it got for it.
	PreviousSeq *int64
	// FirstOfReservation: the event carries a reservation id and no earlier
	// event of that reservation with the same cause passes the endpoint's
	// filters.
	FirstOfReservation bool
	// Lines are the events of that reservation with the same cause passing
	// the filters (this one first), when FirstOfReservation.
	Lines []WebhookLine
	// LowStockThreshold is the SKU's own stock.low threshold as it is now;
	// nil: the endpoint's.
	LowStockThreshold *int
	// Offer is the waitlist offer a RESERVED event is — set on the first of
	// the offer's events that passes the filters only — nil for any other
	// event (read only for endpoints with waitlist.offered).
	Offer *WebhookOffer
	// OrderAction is the fulfil or cancel a FULFILLED or CANCELLED event
	// belongs to — set on the first of its events that passes the filters
	// only (read only for endpoints with order.fulfilled or order.cancelled).
	OrderAction *WebhookOrderAction
}

// WebhookOrderAction is one fulfillOrder or cancelOrder as its webhook
// shows it: the order, the caller's reference, a cancel's reason, and what
// it moved per (SKU, location).
type WebhookOrderAction struct {
	OrderRef  string
	Reference string
	Reason    *string
	Lines     []WebhookOrderLine
}

// WebhookOrderLine is the units an order action moved on one balance.
type WebhookOrderLine struct {
	SKU      string `json:"sku"`
	Location string `json:"location"`
	Quantity int    `json:"quantity"`
}

// WebhookOffer is the waitlist entry a reservation was offered to.
type WebhookOffer struct {
	EntryID    string
	CheckoutID string
	Quantity   int
	// Lines are the offer's units by location: one for an entry that waits
	// at a location, one or more (in sourcing order) for one that does not.
	Lines []WebhookOfferLine
}

// WebhookOfferLine is what an offer holds at one location.
type WebhookOfferLine struct {
	Location string `json:"location"`
	Quantity int    `json:"quantity"`
}

// WebhookLine is one balance change of a reservation's transition.
type WebhookLine struct {
	Seq       int64  `json:"seq"`
	SKU       string `json:"sku"`
	Location  string `json:"location"`
	OnHand    int    `json:"onHand"`
	Reserved  int    `json:"reserved"`
	Available int    `json:"available"`
}

// WebhooksDue lists the endpoints that are not paused and have published
// stock events after their cursor.
func (s *Store) WebhooksDue(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text FROM webhook_endpoints
		WHERE paused_at IS NULL AND cursor_seq < (SELECT last_seq FROM stock_events_head) ORDER BY id`)
	if err != nil {
		return nil, wrap("WebhooksDue", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, wrap("WebhooksDue", err)
}

// WebhookPending reads the endpoint and the published stock events after its
// cursor, up to window seqs further (seq is dense, so the events read are
// exactly those through scanned), keeping those its filters select, each with
// what the endpoint's topics need to decide on it. A cursor older than the
// retained events is *domain.ErrCursorExpired. An endpoint that no longer
// exists is NOT_FOUND.
func (s *Store) WebhookPending(ctx context.Context, id string, window int) (t WebhookTarget, events []WebhookEvent, scanned int64, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		var topics, skus, locations []string
		var secrets sealedSecrets
		var head, pruned int64
		err := tx.QueryRow(ctx, `
			SELECT id::text, url, `+webhookSecretColumns+`,
			       paused_at IS NOT NULL, cursor_seq, topics, sku_filter, location_filter, low_stock_threshold,
			       (SELECT last_seq FROM stock_events_head), (SELECT through_seq FROM stock_events_pruned)
			FROM webhook_endpoints WHERE id = $1::uuid`, id).Scan(append(append([]any{&t.ID, &t.URL}, secrets.dest()...), &t.Paused, &t.Cursor,
			&topics, &skus, &locations, &t.LowStockThreshold, &head, &pruned)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return webhookNotFound(id)
		}
		if err != nil {
			return err
		}
		for _, x := range topics {
			t.Topics = append(t.Topics, domain.WebhookTopic(x))
		}
		if t.Secrets, err = secrets.open(s.Keyring, t.ID); err != nil {
			return err
		}
		if t.Cursor < pruned {
			return &domain.ErrCursorExpired{After: t.Cursor, OldestKept: pruned}
		}
		scanned = min(head, t.Cursor+int64(window))
		if t.Paused || scanned <= t.Cursor {
			return nil
		}
		// prev: the balance's previous event (none and nothing pruned: a new
		// balance, available 0). first/lines: for a reservation's EXPIRED or
		// CONFIRMED event, whether an earlier one of the same reservation
		// and cause passes the filters, and all that do.
		rows, err := tx.Query(ctx, `
			WITH sel AS (
				SELECT e.seq, e.sku_id, e.location_id, s.code AS sku, l.code AS location, e.cause, e.on_hand, e.reserved,
				       e.committed, e.at, e.reservation_id, e.order_action_id, s.low_stock_threshold
				FROM stock_events e JOIN skus s ON s.id = e.sku_id JOIN locations l ON l.id = e.location_id
				WHERE e.seq > $1 AND e.seq <= $2
				  AND (cardinality($3::text[]) = 0 OR s.code = ANY($3))
				  AND (cardinality($4::text[]) = 0 OR l.code = ANY($4))
			)
			SELECT e.seq, e.sku, e.location, e.cause, e.on_hand, e.reserved, e.committed, e.at, e.reservation_id::text, e.low_stock_threshold,
			       coalesce(p.available, CASE WHEN $5 = 0 THEN 0 END), coalesce(p.seq, CASE WHEN $5 = 0 THEN 0 END),
			       CASE WHEN e.reservation_id IS NOT NULL AND e.cause IN ('expired', 'confirmed') THEN
			         NOT EXISTS (SELECT FROM stock_events f JOIN skus fs ON fs.id = f.sku_id JOIN locations fl ON fl.id = f.location_id
			                     WHERE f.reservation_id = e.reservation_id AND f.seq IS NOT NULL AND f.seq < e.seq AND f.cause = e.cause
			                       AND (cardinality($3::text[]) = 0 OR fs.code = ANY($3))
			                       AND (cardinality($4::text[]) = 0 OR fl.code = ANY($4)))
			       ELSE false END AS first,
			       CASE WHEN e.reservation_id IS NOT NULL AND e.cause IN ('expired', 'confirmed') THEN
			         (SELECT json_agg(json_build_object('seq', f.seq, 'sku', fs.code, 'location', fl.code, 'onHand', f.on_hand,
			                                            'reserved', f.reserved, 'committed', f.committed,
			                                            'available', f.on_hand - f.reserved - f.committed) ORDER BY f.seq)
			          FROM stock_events f JOIN skus fs ON fs.id = f.sku_id JOIN locations fl ON fl.id = f.location_id
			          WHERE f.reservation_id = e.reservation_id AND f.seq IS NOT NULL AND f.seq >= e.seq AND f.cause = e.cause
			            AND (cardinality($3::text[]) = 0 OR fs.code = ANY($3))
			            AND (cardinality($4::text[]) = 0 OR fl.code = ANY($4)))
			       END AS lines,
			       o.id, o.checkout_id, o.quantity, o.lines,
			       a.ref, a.reference, a.reason, a.lines
			FROM sel e
			LEFT JOIN LATERAL (
				-- An offer's reservation has the request key waitlist:<entry
				-- id>, which reserve refuses from clients; one primary-key
				-- probe each, only for an endpoint that wants the topic
				-- (offerEntryOf: a client's key from before that prefix was
				-- reserved is no offer).
				--
				-- An offer sourced over several locations has a RESERVED
				-- event per location: it is delivered once, at the first
				-- of them that passes the filters, with all its lines.
				SELECT w.id::text, w.checkout_id, w.quantity,
				       (SELECT json_agg(json_build_object('location', ol.code, 'quantity', rl.quantity) ORDER BY rl.id)
				        FROM reservation_lines rl JOIN locations ol ON ol.id = rl.location_id WHERE rl.reservation_id = r.id) AS lines
				FROM reservations r JOIN waitlist_entries w
				  ON w.id = `+offerEntryOf+` AND w.reservation_id = r.id
				WHERE $6 AND e.cause = 'reserved' AND r.id = e.reservation_id
				  AND NOT EXISTS (SELECT FROM stock_events f JOIN skus fs ON fs.id = f.sku_id JOIN locations fl ON fl.id = f.location_id
				                  WHERE f.reservation_id = e.reservation_id AND f.seq IS NOT NULL AND f.seq < e.seq AND f.cause = 'reserved'
				                    AND (cardinality($3::text[]) = 0 OR fs.code = ANY($3))
				                    AND (cardinality($4::text[]) = 0 OR fl.code = ANY($4)))
			) o ON true
			LEFT JOIN LATERAL (
				-- A fulfil or a cancel: delivered once, at the first of its
				-- events that passes the filters, with all its lines. Its
				-- lines are in the order its events were written (one per
				-- balance, by ids), so the first line that passes the
				-- filters names that event: no other event is read. (A
				-- search of earlier events instead was planned, on
				-- statistics from before any order event, as a scan of
				-- every retained event per event: 16 s a window.)
				SELECT ao.ref, a.reference, a.reason, a.lines
				FROM order_actions a JOIN orders ao ON ao.id = a.order_id
				WHERE $7 AND a.id = e.order_action_id
				  AND (e.sku, e.location) = (
				      SELECT l->>'sku', l->>'location' FROM jsonb_array_elements(a.lines) WITH ORDINALITY AS x(l, i)
				      WHERE (cardinality($3::text[]) = 0 OR l->>'sku' = ANY($3))
				        AND (cardinality($4::text[]) = 0 OR l->>'location' = ANY($4))
				      ORDER BY i LIMIT 1)
			) a ON true
			LEFT JOIN LATERAL (
				SELECT p.on_hand - p.reserved - p.committed AS available, p.seq FROM stock_events p
				WHERE p.sku_id = e.sku_id AND p.location_id = e.location_id AND p.seq IS NOT NULL AND p.seq < e.seq
				ORDER BY p.seq DESC LIMIT 1
			) p ON true
			ORDER BY e.seq`, t.Cursor, scanned, skus, locations, pruned, t.Has(domain.TopicWaitlistOffered),
			t.Has(domain.TopicOrderFulfilled) || t.Has(domain.TopicOrderCancelled))
		if err != nil {
			return err
		}
		events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookEvent, error) {
			var e WebhookEvent
			var cause string
			var lines []byte
			var entryID, checkoutID *string
			var quantity *int
			var offerLines, actionLines []byte
			var orderRef, reference, reason *string
			err := r.Scan(&e.Seq, &e.SKU, &e.Location, &cause, &e.OnHand, &e.Reserved, &e.Committed, &e.At, &e.ReservationID, &e.LowStockThreshold,
				&e.PreviousAvailable, &e.PreviousSeq, &e.FirstOfReservation, &lines, &entryID, &checkoutID, &quantity, &offerLines,
				&orderRef, &reference, &reason, &actionLines)
			if err == nil && orderRef != nil {
				e.OrderAction = &WebhookOrderAction{OrderRef: *orderRef, Reference: *reference, Reason: reason}
				err = json.Unmarshal(actionLines, &e.OrderAction.Lines)
			}
			if err == nil && entryID != nil {
				e.Offer = &WebhookOffer{EntryID: *entryID, CheckoutID: *checkoutID, Quantity: *quantity}
				if offerLines != nil {
					err = json.Unmarshal(offerLines, &e.Offer.Lines)
				}
			}
			e.Cause = domain.StockEventCause(strings.ToUpper(cause))
			if err == nil && e.FirstOfReservation && lines != nil {
				err = json.Unmarshal(lines, &e.Lines)
			}
			return e, err
		})
		return err
	})
	return t, events, scanned, wrap("WebhookPending", err)
}
