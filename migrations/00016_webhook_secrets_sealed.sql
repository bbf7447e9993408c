-- +goose Up

-- Webhook signing secrets sealed at rest with the codes key ring
-- (AES-256-GCM, key id beside each, bound to the endpoint id). The
-- plaintext columns stay for rows written before this version: the server
-- seals them at start-up (store.WebhookSecretsSeal) and clears them, and
-- `inventory codes rekey` re-seals every secret under the current key.
ALTER TABLE webhook_endpoints
    ALTER COLUMN secret DROP NOT NULL,
    ADD COLUMN secret_sealed          bytea,
    ADD COLUMN secret_key_id          text,
    ADD COLUMN previous_secret_sealed bytea,
    ADD COLUMN previous_secret_key_id text,
    ADD CONSTRAINT webhook_endpoints_secret_present
        CHECK (secret IS NOT NULL OR (secret_sealed IS NOT NULL AND secret_key_id IS NOT NULL));

-- +goose Down
-- Fails while any secret is sealed only (secret NULL): open them first with
-- the version that sealed them; the plaintext cannot be recovered here.
ALTER TABLE webhook_endpoints
    DROP CONSTRAINT webhook_endpoints_secret_present,
    ALTER COLUMN secret SET NOT NULL,
    DROP COLUMN secret_sealed,
    DROP COLUMN secret_key_id,
    DROP COLUMN previous_secret_sealed,
    DROP COLUMN previous_secret_key_id;
