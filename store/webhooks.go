package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"inventory/domain"
	"inventory/webhooks"
)

var _ domain.Webhooks = (*Store)(nil)

const webhookColumns = `id::text, url, topics, sku_filter, location_filter, low_stock_threshold, cursor_seq, paused_at, pause_reason,
	consecutive_failures, CASE WHEN previous_secret_until > now() THEN previous_secret_until END, created_at, updated_at`

func scanWebhook(r pgx.Row) (domain.WebhookEndpoint, error) {
	var w domain.WebhookEndpoint
	var topics []string
	err := r.Scan(&w.ID, &w.URL, &topics, &w.SKUs, &w.Locations, &w.LowStockThreshold, &w.CursorSeq, &w.PausedAt, &w.PauseReason,
		&w.ConsecutiveFailures, &w.PreviousSecretUntil, &w.CreatedAt, &w.UpdatedAt)
	for _, t := range topics {
		w.Topics = append(w.Topics, domain.WebhookTopic(t))
	}
	return w, err
}

func webhookNotFound(id string) error {
	return &domain.Error{Code: domain.CodeNotFound, Field: []string{"id"}, Message: "no webhook " + id}
}

// checkWebhookURL is the URL policy: webhooks.CheckURL with the store's
// WebhookAllowPrivate.
func (s *Store) checkWebhookURL(u string) error { return webhooks.CheckURL(u, s.WebhookAllowPrivate) }

func topicStrings(ts []domain.WebhookTopic) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// WebhookCreate registers an endpoint with a new secret. Delivery starts
// after the newest published stock event.
func (s *Store) WebhookCreate(ctx context.Context, in domain.CreateWebhookInput) (domain.WebhookSecret, error) {
	if err := in.Validate(s.checkWebhookURL); err != nil {
		return domain.WebhookSecret{}, err
	}
	out := domain.WebhookSecret{Secret: webhooks.NewSecret()}
	threshold := domain.DefaultLowStockThreshold
	if in.LowStockThreshold != nil {
		threshold = *in.LowStockThreshold
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM webhook_endpoints`).Scan(&n); err != nil {
			return err
		}
		if n >= domain.MaxWebhookEndpoints {
			return &domain.Error{Code: domain.CodeLimitExceeded, Message: "at most 100 webhooks"}
		}
		// The id is chosen first: the sealed secret is bound to it.
		var id string
		if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
			return err
		}
		sealed, keyID, err := s.sealWebhookSecret(id, out.Secret)
		if err != nil {
			return err
		}
		out.Webhook, err = scanWebhook(tx.QueryRow(ctx, `
			INSERT INTO webhook_endpoints (id, url, topics, sku_filter, location_filter, secret_sealed, secret_key_id, low_stock_threshold, cursor_seq)
			VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, (SELECT last_seq FROM stock_events_head))
			RETURNING `+webhookColumns,
			id, in.URL, topicStrings(in.Topics), orEmpty(in.SKUs), orEmpty(in.Locations), sealed, keyID, threshold))
		return err
	})
	return out, wrap("WebhookCreate", err)
}

// WebhookList returns every endpoint, oldest first.
func (s *Store) WebhookList(ctx context.Context) ([]domain.WebhookEndpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhook_endpoints ORDER BY created_at, id`)
	if err != nil {
		return nil, wrap("WebhookList", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.WebhookEndpoint, error) { return scanWebhook(r) })
	return list, wrap("WebhookList", err)
}

// webhookUpdate runs one UPDATE … RETURNING on the endpoint id, NOT_FOUND
// when there is none.
func (s *Store) webhookUpdate(ctx context.Context, op, id, set string, args ...any) (domain.WebhookEndpoint, error) {
	canonical, ok := canonicalUUID(id)
	if !ok {
		return domain.WebhookEndpoint{}, webhookNotFound(id)
	}
	w, err := scanWebhook(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET `+set+`, updated_at = now()
		WHERE id = $1 RETURNING `+webhookColumns, append([]any{canonical}, args...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, webhookNotFound(id)
	}
	return w, wrap(op, err)
}

// WebhookUpdate changes the fields that are set.
func (s *Store) WebhookUpdate(ctx context.Context, in domain.UpdateWebhookInput) (domain.WebhookEndpoint, error) {
	if err := in.Validate(s.checkWebhookURL); err != nil {
		return domain.WebhookEndpoint{}, err
	}
	var topics []string
	if in.Topics != nil {
		topics = topicStrings(in.Topics)
	}
	return s.webhookUpdate(ctx, "WebhookUpdate", in.ID, `url = coalesce($2, url), topics = coalesce($3, topics),
		sku_filter = coalesce($4, sku_filter), location_filter = coalesce($5, location_filter),
		low_stock_threshold = coalesce($6, low_stock_threshold)`,
		in.URL, topics, in.SKUs, in.Locations, in.LowStockThreshold)
}

// WebhookPause stops deliveries; an already paused endpoint keeps its first
// pause time and takes the new reason.
func (s *Store) WebhookPause(ctx context.Context, id, reason string) (domain.WebhookEndpoint, error) {
	if len(reason) > domain.MaxWebhookPauseReason {
		return domain.WebhookEndpoint{}, domain.InvalidInput([]string{"reason"}, "at most %d characters", domain.MaxWebhookPauseReason)
	}
	if reason == "" {
		reason = "paused by an admin"
	}
	return s.webhookUpdate(ctx, "WebhookPause", id, `paused_at = coalesce(paused_at, now()), pause_reason = $2`, reason)
}

// WebhookResume restarts deliveries after the cursor, or after the oldest
// retained event when older ones were pruned meanwhile.
func (s *Store) WebhookResume(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	return s.webhookUpdate(ctx, "WebhookResume", id, `paused_at = NULL, pause_reason = NULL, consecutive_failures = 0,
		cursor_seq = greatest(cursor_seq, (SELECT through_seq FROM stock_events_pruned))`)
}

// WebhookRotateSecret makes a new secret; the current one keeps signing next
// to it for domain.WebhookSecretOverlap.
func (s *Store) WebhookRotateSecret(ctx context.Context, id string) (domain.WebhookSecret, error) {
	canonical, ok := canonicalUUID(id)
	if !ok {
		return domain.WebhookSecret{}, webhookNotFound(id)
	}
	secret := webhooks.NewSecret()
	sealed, keyID, err := s.sealWebhookSecret(canonical, secret)
	if err != nil {
		return domain.WebhookSecret{}, wrap("WebhookRotateSecret", err)
	}
	// The sealed columns move along with the plaintext one (a row not yet
	// sealed at start-up has only that): the previous secret stays
	// readable whichever it is.
	w, err := s.webhookUpdate(ctx, "WebhookRotateSecret", canonical, `previous_secret = secret,
		previous_secret_sealed = secret_sealed, previous_secret_key_id = secret_key_id,
		secret = NULL, secret_sealed = $2, secret_key_id = $3,
		previous_secret_until = now() + make_interval(secs => $4)`, sealed, keyID, domain.WebhookSecretOverlap.Seconds())
	if err != nil {
		return domain.WebhookSecret{}, err
	}
	return domain.WebhookSecret{Webhook: w, Secret: secret}, nil
}

// WebhookDelete removes an endpoint and its delivery log.
func (s *Store) WebhookDelete(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	canonical, ok := canonicalUUID(id)
	if !ok {
		return domain.WebhookEndpoint{}, webhookNotFound(id)
	}
	w, err := scanWebhook(s.pool.QueryRow(ctx, `DELETE FROM webhook_endpoints WHERE id = $1 RETURNING `+webhookColumns, canonical))
	if errors.Is(err, pgx.ErrNoRows) {
		return w, webhookNotFound(id)
	}
	return w, wrap("WebhookDelete", err)
}

// WebhookDeliveryList is the endpoint's delivery log, newest first.
func (s *Store) WebhookDeliveryList(ctx context.Context, endpointID string, first int, after int64) ([]domain.WebhookDelivery, error) {
	if first < 1 || first > domain.MaxWebhookDeliveries {
		return nil, domain.Limitf("first must be between 1 and %d", domain.MaxWebhookDeliveries)
	}
	canonical, ok := canonicalUUID(endpointID)
	if !ok {
		return nil, webhookNotFound(endpointID)
	}
	var list []domain.WebhookDelivery
	err := pgx.BeginTxFunc(ctx, s.pool, readTx, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM webhook_endpoints WHERE id = $1)`, canonical).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return webhookNotFound(endpointID)
		}
		rows, err := tx.Query(ctx, `
			SELECT id, webhook_id, event_seq, topic, attempt, status_code, latency_ms, error, at
			FROM webhook_deliveries WHERE endpoint_id = $1 AND ($2 = 0 OR id < $2)
			ORDER BY id DESC LIMIT $3`, canonical, after, first)
		if err != nil {
			return err
		}
		list, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.WebhookDelivery, error) {
			var d domain.WebhookDelivery
			err := r.Scan(&d.ID, &d.WebhookID, &d.EventSeq, &d.Topic, &d.Attempt, &d.StatusCode, &d.LatencyMs, &d.Error, &d.At)
			return d, err
		})
		return err
	})
	return list, wrap("WebhookDeliveryList", err)
}

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

// WebhookAttempt is one delivery attempt to record.
type WebhookAttempt struct {
	WebhookID  string
	EventSeq   *int64
	Topic      string
	StatusCode *int
	Latency    time.Duration
	Error      *string
}

// WebhookDelivered records a successful attempt and moves the cursor to
// through (never backwards), resetting the failure count.
func (s *Store) WebhookDelivered(ctx context.Context, id string, a WebhookAttempt, through int64) error {
	return wrap("WebhookDelivered", s.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertAttempt(ctx, tx, id, a); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET cursor_seq = greatest(cursor_seq, $2), consecutive_failures = 0
			WHERE id = $1::uuid`, id, through)
		return err
	}))
}

// WebhookAdvance moves the cursor past events the endpoint does not select.
func (s *Store) WebhookAdvance(ctx context.Context, id string, through int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE webhook_endpoints SET cursor_seq = greatest(cursor_seq, $2) WHERE id = $1::uuid`, id, through)
	return wrap("WebhookAdvance", err)
}

// WebhookFailed records a failed attempt; at pauseAfter consecutive failures
// it pauses the endpoint with the attempt's error as the reason and reports
// paused.
func (s *Store) WebhookFailed(ctx context.Context, id string, a WebhookAttempt, pauseAfter int) (paused bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := insertAttempt(ctx, tx, id, a); err != nil {
			return err
		}
		reason := "delivery failed"
		if a.Error != nil {
			reason = *a.Error
		}
		return tx.QueryRow(ctx, `
			UPDATE webhook_endpoints SET consecutive_failures = consecutive_failures + 1,
			       paused_at = CASE WHEN consecutive_failures + 1 >= $2 THEN coalesce(paused_at, now()) ELSE paused_at END,
			       pause_reason = CASE WHEN consecutive_failures + 1 >= $2 AND paused_at IS NULL
			                           THEN format('%s consecutive failed deliveries; last: %s', consecutive_failures + 1, $3::text)
			                           ELSE pause_reason END
			WHERE id = $1::uuid RETURNING paused_at IS NOT NULL`, id, pauseAfter, reason).Scan(&paused)
	})
	return paused, wrap("WebhookFailed", err)
}

// WebhookPauseFor pauses an endpoint from delivery (e.g. its cursor expired).
func (s *Store) WebhookPauseFor(ctx context.Context, id, reason string) error {
	_, err := s.pool.Exec(ctx, `UPDATE webhook_endpoints SET paused_at = coalesce(paused_at, now()), pause_reason = $2, updated_at = now()
		WHERE id = $1::uuid`, id, reason)
	return wrap("WebhookPauseFor", err)
}

func insertAttempt(ctx context.Context, tx pgx.Tx, id string, a WebhookAttempt) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO webhook_deliveries (endpoint_id, webhook_id, event_seq, topic, attempt, status_code, latency_ms, error)
		SELECT $1::uuid, $2, $3, $4,
		       1 + (SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1::uuid AND webhook_id = $2),
		       $5, $6, $7
		WHERE EXISTS (SELECT FROM webhook_endpoints WHERE id = $1::uuid)`,
		id, a.WebhookID, a.EventSeq, a.Topic, a.StatusCode, int(a.Latency.Milliseconds()), a.Error)
	return err
}

// WebhookLag is how many stock event seqs the furthest-behind endpoint that
// is not paused still has to go (the newest published seq minus the smallest
// such cursor, 0 without endpoints), and how many endpoints are paused. One
// statement.
func (s *Store) WebhookLag(ctx context.Context) (lag int64, paused int, err error) {
	err = s.pool.QueryRow(ctx, `SELECT
		coalesce(greatest((SELECT last_seq FROM stock_events_head) - min(cursor_seq) FILTER (WHERE paused_at IS NULL), 0), 0),
		count(*) FILTER (WHERE paused_at IS NOT NULL)
		FROM webhook_endpoints`).Scan(&lag, &paused)
	return lag, paused, wrap("WebhookLag", err)
}

// WebhookTestTarget is where a test delivery to endpoint id goes and the
// secrets that sign it (the previous one too during a rotation).
func (s *Store) WebhookTestTarget(ctx context.Context, id string) (WebhookTarget, error) {
	t := WebhookTarget{ID: id}
	canonical, ok := canonicalUUID(id)
	if !ok {
		return t, webhookNotFound(id)
	}
	t.ID = canonical
	var secrets sealedSecrets
	err := s.pool.QueryRow(ctx, `SELECT url, `+webhookSecretColumns+`
		FROM webhook_endpoints WHERE id = $1`, canonical).Scan(append([]any{&t.URL}, secrets.dest()...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, webhookNotFound(id)
	}
	if err != nil {
		return t, wrap("WebhookTestTarget", err)
	}
	t.Secrets, err = secrets.open(s.Keyring, canonical)
	return t, wrap("WebhookTestTarget", err)
}

// WebhookTestRecorded records a test delivery (attempt 1, no event seq) in
// the endpoint's log without moving its cursor, and returns it.
func (s *Store) WebhookTestRecorded(ctx context.Context, id string, a WebhookAttempt) (domain.WebhookDelivery, error) {
	d := domain.WebhookDelivery{WebhookID: a.WebhookID, Topic: a.Topic, StatusCode: a.StatusCode, Error: a.Error}
	err := s.pool.QueryRow(ctx, `
		INSERT INTO webhook_deliveries (endpoint_id, webhook_id, topic, attempt, status_code, latency_ms, error)
		SELECT $1::uuid, $2, $3, 1, $4, $5, $6
		WHERE EXISTS (SELECT FROM webhook_endpoints WHERE id = $1::uuid)
		RETURNING id, attempt, latency_ms, at`,
		id, a.WebhookID, a.Topic, a.StatusCode, int(a.Latency.Milliseconds()), a.Error).Scan(&d.ID, &d.Attempt, &d.LatencyMs, &d.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.WebhookDelivery{}, webhookNotFound(id) // deleted meanwhile
	}
	return d, wrap("WebhookTestRecorded", err)
}
