#!/usr/bin/env bash
# run.sh is "make run": find or start PostgreSQL, migrate, load the demo catalog
# once, mint a development admin token, print how to reach the server, serve.
set -euo pipefail
cd "$(dirname "$0")/.."
DATABASE_URL=$(scripts/pgup.sh)
export DATABASE_URL
mkdir -p .data

# Development secrets are generated once and kept in .data/dev.env (ignored by
# git). Variables already set in the environment win.
key() { head -c 32 /dev/urandom | base64 | tr -d '\n'; }
if [ ! -f .data/dev.env ]; then
  umask 077
  {
    echo "INVENTORY_TOKEN_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
  } > .data/dev.env
  echo "make run: generated a development token secret in .data/dev.env" >&2
fi
if ! grep -q '^INVENTORY_CODES_KEY=' .data/dev.env; then
  umask 077
  {
    echo "INVENTORY_CODES_KEY=dev1:$(key)"
    echo "INVENTORY_CODES_HMAC_KEY=$(key)"
  } >> .data/dev.env
  echo "make run: generated development code encryption keys in .data/dev.env (keep them: codes imported with them cannot be read without them)" >&2
fi
while IFS='=' read -r key value; do
  [ -n "$key" ] && [ -z "${!key:-}" ] && export "$key=$value"
done < .data/dev.env

go build -o bin/inventory .
bin/inventory migrate
bin/inventory demo
# A fresh development admin token each run: secrets are stored hashed, so the
# old one cannot be shown again.
bin/inventory token revoke dev-admin >/dev/null 2>&1 || true
ADMIN_TOKEN=$(bin/inventory token create --role admin --name dev-admin | tail -n 1)
LISTEN_ADDR=${LISTEN_ADDR:-:8080}
PORT=${LISTEN_ADDR##*:}
cat <<MSG

  Inventory server: http://localhost:$PORT/  (GraphiQL)   API: http://localhost:$PORT/graphql
  Database:         $DATABASE_URL
  Admin token:      $ADMIN_TOKEN

  Try: curl -s localhost:$PORT/graphql -H 'Content-Type: application/json' \\
         -d '{"query":"{ availability(skus: [\"HEADPHONES-BLK\"]) { sku available } }"}'

MSG
export LISTEN_ADDR
exec bin/inventory serve
