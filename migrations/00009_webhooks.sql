-- +goose Up

-- Outbound webhooks, managed by admins through GraphQL. cursor_seq is the
-- stock event seq delivered up to: delivery reads published events after it,
-- so a restart or a pause resumes where it stopped. secret and
-- previous_secret are Standard Webhooks secrets (whsec_<base64>); during a
-- rotation deliveries are signed with both until previous_secret_until.
CREATE TABLE webhook_endpoints (
    id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    url                    text NOT NULL CHECK (char_length(url) BETWEEN 1 AND 2048),
    topics                 text[] NOT NULL CHECK (cardinality(topics) > 0),
    sku_filter             text[] NOT NULL DEFAULT '{}',
    location_filter        text[] NOT NULL DEFAULT '{}',
    secret                 text NOT NULL,
    previous_secret        text,
    previous_secret_until  timestamptz,
    paused_at              timestamptz,
    pause_reason           text,
    consecutive_failures   integer NOT NULL DEFAULT 0,
    cursor_seq             bigint NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);

-- One row per delivery attempt. webhook_id is stable per event and endpoint
-- ("evt_<seq>"), so a retried delivery carries the same webhook-id.
CREATE TABLE webhook_deliveries (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id  uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    webhook_id   text NOT NULL,
    event_seq    bigint,
    topic        text NOT NULL,
    attempt      integer NOT NULL,
    status_code  integer,
    latency_ms   integer NOT NULL,
    error        text,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, id DESC);
CREATE INDEX webhook_deliveries_webhook_id_idx ON webhook_deliveries (endpoint_id, webhook_id);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_endpoints;
