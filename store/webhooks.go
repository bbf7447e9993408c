package store

import (
	"context"
	"errors"
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
	return s.webhookDeliveries(ctx, endpointID, first, after)
}

// webhookDeliveries reads up to limit of an endpoint's deliveries with ids
// below after (0: from the newest) in one transaction; an unknown endpoint
// is NOT_FOUND.
func (s *Store) webhookDeliveries(ctx context.Context, endpointID string, limit int, after int64) ([]domain.WebhookDelivery, error) {
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
			ORDER BY id DESC LIMIT $3`, canonical, after, limit)
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
