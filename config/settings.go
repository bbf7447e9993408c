package config

import (
	"fmt"
	"strings"
)

// Setting is one environment variable the server reads: the one list that
// Load, `inventory settings` and docs/configuration.md (generated from
// it) share. TestSettingsMatchConfig checks that Load reads exactly
// these names and that each Default is what Load does without it.
type Setting struct {
	Name    string
	Group   string
	Default string // the value in effect when unset, as one would write it; "" when there is none
	Shown   string // how the docs show a default that is not a plain value
	Meaning string // Markdown
	// Brief is the one line a command's help gives the setting (cli/commands.go,
	// settingsHelp); set for the settings some help lists, and only those.
	Brief string
}

// Settings lists every variable, in the order the docs show them.
var Settings = []Setting{
	{Name: "DATABASE_URL", Group: "Essentials", Default: "", Shown: "(required; `make run` sets it)",
		Meaning: "PostgreSQL connection URL for request traffic (the request, job and event-relay pools); may point at PgBouncer in transaction mode (set `INVENTORY_DB_POOLER=transaction` and `DATABASE_DIRECT_URL` then)",
		Brief:   "PostgreSQL URL (make run writes it to .data/dev.env)"},
	{Name: "LISTEN_ADDR", Group: "Essentials", Default: ":8080", Shown: "",
		Meaning: "HTTP listen address (`127.0.0.1:0` picks a free port)",
		Brief:   "HTTP listen address"},
	{Name: "INVENTORY_TOKEN_SECRET", Group: "Essentials", Default: "", Shown: "(required to serve)",
		Meaning: "HMAC key ring for checkout tokens, admin sessions and paging cursors: `secret[,older secret…]` (at most 4, each at least 32 bytes); the first signs, all verify; all instances share it (rotation: docs/operations/secrets-rotation.md)",
		Brief:   "token secrets, each at least 32 bytes; the first signs"},
	{Name: "INVENTORY_CODES_KEY", Group: "Essentials", Default: "", Shown: "(required to serve)",
		Meaning: "code encryption key ring: `id:base64key[,id:base64key…]`, first seals new codes",
		Brief:   "code encryption keys id:base64[,…]; the first seals"},
	{Name: "INVENTORY_CODES_HMAC_KEY", Group: "Essentials", Default: "", Shown: "(required to serve)",
		Meaning: "base64 32-byte key for code dedupe fingerprints; never rotate",
		Brief:   "code fingerprint key, base64"},
	{Name: "DATABASE_DIRECT_URL", Group: "Database", Default: "", Shown: "`DATABASE_URL`",
		Meaning: "a direct connection to the primary for what needs a session: migrations (an advisory lock), the event stream's `LISTEN`, and River's job-working client (its `LISTEN` and leader election). When set, River gets a pool of its own there (`INVENTORY_DB_DIRECT_CONNS`); job work itself stays on `DATABASE_URL`",
		Brief:   "a direct connection to the primary; used instead of DATABASE_URL when set"},
	{Name: "INVENTORY_DB_POOLER", Group: "Database", Default: "none", Shown: "",
		Meaning: "`transaction` when `DATABASE_URL` is PgBouncer (or another pooler) in transaction mode: no server-side prepared statements (statement descriptions are cached client-side, queries stay one round trip) and no startup parameters (`statement_timeout`, `lock_timeout`, `jit` must then be the role's defaults: `ALTER ROLE … SET`, see docs/operations/pgbouncer-and-standby.md; `serve` refuses to start when they are unbounded). `none`: a direct connection",
		Brief:   "transaction when DATABASE_URL is PgBouncer (needs DATABASE_DIRECT_URL)"},
	{Name: "INVENTORY_DB_DIRECT_CONNS", Group: "Database", Default: "4", Shown: "",
		Meaning: "River's pool on `DATABASE_DIRECT_URL`, when that is set (one held for `LISTEN`, the rest for fetching and completing jobs in batches), per instance"},
	{Name: "DATABASE_REPLICA_URL", Group: "Database", Default: "", Shown: "(none)",
		Meaning: "a streaming standby of the primary (hot standby) for storefront reads: the in-memory availability copy's loads and catalog reads, and `availability` when the copy cannot answer it, while the standby's replay lag is within `INVENTORY_REPLICA_MAX_LAG`. Past it, or when the standby does not answer, the primary does (readiness does not depend on the standby). Nothing that decides a sale reads it: mutations, `sku`, `balances`, `reservation` and a checkout's reservations always read the primary"},
	{Name: "INVENTORY_REPLICA_MAX_LAG", Group: "Database", Default: "1s", Shown: "",
		Meaning: "how far behind the standby may be (its replay lag, measured every 100 ms from WAL positions, `inventory_replica_lag_seconds`) and still answer reads"},
	{Name: "INVENTORY_DB_REPLICA_CONNS", Group: "Database", Default: "4", Shown: "",
		Meaning: "connections to `DATABASE_REPLICA_URL`, per instance"},
	{Name: "INVENTORY_DB_MAX_CONNS", Group: "Database", Default: "20", Shown: "",
		Meaning: "connections for HTTP requests, per instance. Requests, River and the event relay each have a pool of their own (`application_name` `inventory-api`, `-jobs`, `-events`; all `inventory` through a transaction pooler, which would otherwise reset the name on every lend), so requests queued on a hot balance cannot starve expiry or live stock"},
	{Name: "INVENTORY_DB_ANONYMOUS_CONNS", Group: "Database", Default: "", Shown: "a fifth of `INVENTORY_DB_MAX_CONNS`, at least 1, at most 4",
		Meaning: "of the request connections, how many anonymous queries may use at once (each root field such as `availability` holds one while it runs; more wait, up to `INVENTORY_REQUEST_TIMEOUT`). At most `INVENTORY_DB_MAX_CONNS` − 1: checkouts and keys always keep the rest. Each slot can keep a database core busy, so raise it with the database's cores, not with the pool"},
	{Name: "INVENTORY_DB_JOB_CONNS", Group: "Database", Default: "", Shown: "job workers + 5",
		Meaning: "connections for River (expiry jobs, sweeper, reconciliation)"},
	{Name: "INVENTORY_DB_EVENT_CONNS", Group: "Database", Default: "4", Shown: "",
		Meaning: "connections for the event relay and subscribers' catch-up reads (plus one for LISTEN). Each relay publish and fetch, waiting for a connection included, is bounded to 10 s; requests by `INVENTORY_REQUEST_TIMEOUT`; River's jobs by River's job timeout (1 min)"},
	{Name: "INVENTORY_DB_STATEMENT_TIMEOUT", Group: "Database", Default: "30s", Shown: "",
		Meaning: "`statement_timeout` of the server's sessions",
		Brief:   "statement_timeout of its sessions"},
	{Name: "INVENTORY_DB_LOCK_TIMEOUT", Group: "Database", Default: "10s", Shown: "",
		Meaning: "`lock_timeout` of the server's sessions: a request that waits longer for a row lock fails (INTERNAL) instead of holding its connection",
		Brief:   "lock_timeout of its sessions"},
	{Name: "INVENTORY_MIGRATE_ON_START", Group: "Database", Default: "true", Shown: "",
		Meaning: "`serve` applies pending migrations first (instances queue on an advisory lock)"},
	{Name: "INVENTORY_MAX_BODY_BYTES", Group: "HTTP", Default: "1048576", Shown: "",
		Meaning: "largest JSON request body (larger: HTTP 413)"},
	{Name: "INVENTORY_MAX_UPLOAD_BYTES", Group: "HTTP", Default: "67108864", Shown: "",
		Meaning: "largest multipart upload that declares `Content-Length`; a chunked upload may be at most 1 MiB (it would be held in memory). Uploads are admin-only and refused from the headers alone (401/403) before any of the body is read"},
	{Name: "INVENTORY_MAX_COMPLEXITY", Group: "HTTP", Default: "20000", Shown: "",
		Meaning: "largest query cost: each field 1 plus its children, and a list field that many times the rows it asks for (`availability`: its SKUs; paged lists: `first`; `locations` 1000, `webhooks` 100). An `availability` of 500 SKUs with every field costs 7,500; the dashboard's `balances(first: 1000)` page 11,000"},
	{Name: "INVENTORY_MAX_QUERY_TOKENS", Group: "HTTP", Default: "10000", Shown: "",
		Meaning: "largest GraphQL document in tokens (names, punctuation, values; commas and comments do not count): the parser gives up past it, before building the document's tree. Storefront and dashboard queries have a few hundred; GraphiQL's introspection about 350"},
	{Name: "INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS", Group: "HTTP", Default: "4194304", Shown: "",
		Meaning: "largest answer to an anonymous caller, in bytes: a document whose answer may be larger (each field's name or alias and a typical value, times the rows it repeats over) is refused before it runs, and an answer that turns out larger is replaced by the refusal before any of it is written (`COMPLEXITY_LIMIT_EXCEEDED`). Aliases and operation, fragment and variable names are at most 128 bytes. An `availability` of 500 SKUs with every field and two locations is about 250 KB"},
	{Name: "INVENTORY_MAX_ANSWER_BYTES", Group: "HTTP", Default: "67108864", Shown: "",
		Meaning: "largest answer to an authenticated caller (a key, a checkout token, an admin session), as `INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS` for anonymous callers"},
	{Name: "INVENTORY_QUERY_CACHE_BYTES", Group: "HTTP", Default: "33554432", Shown: "",
		Meaning: "memory for parsed documents, per instance (each counted as 25 bytes per byte of its text; one larger than a sixteenth of this is not cached). Only documents that parsed, validated and passed the complexity limit are cached; automatic persisted query texts have 8 MiB of their own"},
	{Name: "INVENTORY_SHUTDOWN_TIMEOUT", Group: "HTTP", Default: "15s", Shown: "",
		Meaning: "how long in-flight requests get on SIGINT/SIGTERM; running jobs get half of it, then are cancelled and picked up again by the next instance"},
	{Name: "INVENTORY_HTTP_HEADER_TIMEOUT", Group: "HTTP", Default: "10s", Shown: "",
		Meaning: "a request's headers must have arrived this long after the connection was ready"},
	{Name: "INVENTORY_HTTP_READ_TIMEOUT", Group: "HTTP", Default: "1m", Shown: "",
		Meaning: "every request's body must have arrived this long after its headers, whatever its headers say (else 408 and the connection closes)"},
	{Name: "INVENTORY_HTTP_WRITE_TIMEOUT", Group: "HTTP", Default: "1m", Shown: "",
		Meaning: "a request's answer must be written this long after its headers. Only a completed WebSocket handshake on `/graphql`, or an SSE response to a subscription, is exempt (then the keep-alive and the stall cut-off watch it); an `Upgrade` or `Accept: text/event-stream` header alone exempts nothing"},
	{Name: "INVENTORY_REQUEST_TIMEOUT", Group: "HTTP", Default: "30s", Shown: "",
		Meaning: "a request's handling (over HTTP, and queries and mutations over SSE): one still waiting for a connection or a lock after this long is abandoned (INTERNAL, \"took too long… nothing changed\") and its transaction rolls back. Single-line reserves already in a batch finish with their batch"},
	{Name: "INVENTORY_HTTP_IDLE_TIMEOUT", Group: "HTTP", Default: "2m", Shown: "",
		Meaning: "an idle keep-alive connection is closed"},
	{Name: "INVENTORY_CACHE_MAX_AGE", Group: "HTTP", Default: "5s", Shown: "",
		Meaning: "`Cache-Control: public, max-age` of anonymous `GET /graphql` queries answered without errors (e.g. `availability` with a persisted query behind a CDN; whole seconds, at most `1h`). They also carry an `ETag` (`If-None-Match` gets `304`); authenticated answers are `private, no-store`, error answers `no-store`"},
	{Name: "INVENTORY_KEY_CACHE_TTL", Group: "Auth and fair use", Default: "500ms", Shown: "",
		Meaning: "how long an instance trusts a live API key without reading the database; a revoked key is refused by every instance within this long"},
	{Name: "INVENTORY_ADMIN_SESSION_TTL", Group: "Auth and fair use", Default: "12h", Shown: "",
		Meaning: "how long an `/admin` sign-in lasts (the session also ends when its key is revoked)"},
	{Name: "INVENTORY_CHECKOUT_MAX_HOLD_TTL", Group: "Auth and fair use", Default: "30m", Shown: "",
		Meaning: "`ttlSeconds` that a checkout token's reserve or extend may ask for; past it `LIMIT_EXCEEDED`"},
	{Name: "INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME", Group: "Auth and fair use", Default: "1h", Shown: "",
		Meaning: "how far past its creation an extension may move a checkout token's hold's deadline"},
	{Name: "INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU", Group: "Auth and fair use", Default: "10", Shown: "",
		Meaning: "units of one SKU across a checkout's live holds (pre-ordered units and waitlist offers included), for checkout tokens"},
	{Name: "INVENTORY_CHECKOUT_MAX_LIVE_HOLDS", Group: "Auth and fair use", Default: "20", Shown: "",
		Meaning: "live holds (held and not yet due, waitlist offers included) of one checkout, for checkout tokens"},
	{Name: "INVENTORY_CHECKOUT_MAX_WAITLIST_TTL", Group: "Auth and fair use", Default: "1h", Shown: "",
		Meaning: "`ttlSeconds` a checkout token's `joinWaitlist` entry may wait in line (at most 24 h); past it `LIMIT_EXCEEDED`"},
	{Name: "INVENTORY_CHECKOUT_TOKEN_MAX_TTL", Group: "Auth and fair use", Default: "2h", Shown: "",
		Meaning: "the longest lifetime `issueCheckoutToken` grants (at most 24 h): how long a leaked token stays useful"},
	{Name: "INVENTORY_RATE_LIMIT_WINDOW", Group: "Rate limits, proxies and CORS", Default: "1m", Shown: "",
		Meaning: "the rate limits' window; `Retry-After` says its length in seconds"},
	{Name: "INVENTORY_RATE_LIMIT_ANONYMOUS_READS", Group: "Rate limits, proxies and CORS", Default: "600", Shown: "",
		Meaning: "queries and subscriptions per window per client IP (IPv6: per /64) without a token; `0` is no limit"},
	{Name: "INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES", Group: "Rate limits, proxies and CORS", Default: "60", Shown: "",
		Meaning: "mutations per window per client IP without a token; `0` is no limit"},
	{Name: "INVENTORY_RATE_LIMIT_CHECKOUT_READS", Group: "Rate limits, proxies and CORS", Default: "600", Shown: "",
		Meaning: "queries and subscriptions per window per checkout token's checkoutId"},
	{Name: "INVENTORY_RATE_LIMIT_CHECKOUT_WRITES", Group: "Rate limits, proxies and CORS", Default: "120", Shown: "",
		Meaning: "mutations per window per checkout token's checkoutId"},
	{Name: "INVENTORY_RATE_LIMIT_KEY_READS", Group: "Rate limits, proxies and CORS", Default: "0", Shown: "",
		Meaning: "queries and subscriptions per window per admin or service key (`0`: no limit; the shop's own backends carry every shopper's traffic)"},
	{Name: "INVENTORY_RATE_LIMIT_KEY_WRITES", Group: "Rate limits, proxies and CORS", Default: "0", Shown: "",
		Meaning: "mutations per window per admin or service key (`0`: no limit)"},
	{Name: "INVENTORY_RATE_LIMIT_AUTH_FAILURES", Group: "Rate limits, proxies and CORS", Default: "20", Shown: "",
		Meaning: "requests per window per client IP (IPv6: per /64) whose token does not authenticate (unknown or revoked key, forged or garbled token; an expired checkout token does not count). Past it, a request from the address with a malformed `Authorization` header or an API key this instance does not know to be live gets `429` (`RATE_LIMITED`), and such a WebSocket `connection_init` is closed with `4429`, before anything is looked up; a token that fails its check gets the same after it. Valid credentials are served: a checkout token (its signature is checked in memory) and a live key (the instance lists the live keys' hashes at most every 10 s, so a key created on another instance is known here within 10 s). Requests without a token go on as anonymous. `0` is no limit"},
	{Name: "INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP", Group: "Rate limits, proxies and CORS", Default: "16777216", Shown: "",
		Meaning: "bytes the server holds at once for one client address's `/graphql` requests (IPv6: one /64): JSON bodies being read (reserved at their declared size, or `INVENTORY_MAX_BODY_BYTES`, before a byte is read) and answers being written (twice their size, until written). Past it a request is `429` (`RATE_LIMITED`); one request alone always goes. Bounds what an address holding bodies open or never reading its answers can pin. `0` is no limit"},
	{Name: "INVENTORY_MAX_CONNS_PER_IP", Group: "Rate limits, proxies and CORS", Default: "1024", Shown: "",
		Meaning: "connections one client address (IPv6: one /64) may hold open at once, counted at the listener before a byte is read; one more is answered `429` and closed. Bounds what an address that opens connections and never reads its answers can pin (each connection at most one answer: see `INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS`). Connections from `INVENTORY_TRUSTED_PROXIES` are not counted. `0` is no limit"},
	{Name: "INVENTORY_TRUSTED_PROXIES", Group: "Rate limits, proxies and CORS", Default: "", Shown: "(none)",
		Meaning: "comma-separated CIDR prefixes of your load balancers or CDN; only from those is `X-Forwarded-For` believed (the rightmost address that is not a trusted proxy is the client); a proxy's request that names no client (its health check) spends that proxy's own rate budget. Empty: the TCP peer is the client"},
	{Name: "INVENTORY_CORS_ORIGINS", Group: "Rate limits, proxies and CORS", Default: "", Shown: "(none: no cross-origin access)",
		Meaning: "comma-separated exact origins (`https://shop.example`) whose pages may call `/graphql` over HTTP (with the `Authorization` header; never credentials, i.e. cookies) and WebSocket. No wildcards"},
	{Name: "INVENTORY_RECONCILE_INTERVAL", Group: "Jobs and expiry", Default: "1h", Shown: "",
		Meaning: "how often the reconciliation job checks balances against the ledger"},
	{Name: "INVENTORY_SWEEP_INTERVAL", Group: "Jobs and expiry", Default: "30s", Shown: "",
		Meaning: "how often the sweeper looks for overdue holds"},
	{Name: "INVENTORY_SWEEP_GRACE", Group: "Jobs and expiry", Default: "15s", Shown: "",
		Meaning: "how overdue a hold must be before the sweeper takes it from its expiry job"},
	{Name: "INVENTORY_JOB_WORKERS", Group: "Jobs and expiry", Default: "10", Shown: "",
		Meaning: "River workers per instance"},
	{Name: "INVENTORY_RUN_JOBS", Group: "Jobs and expiry", Default: "true", Shown: "",
		Meaning: "`false`: this instance serves the API and inserts jobs but works none (another instance must)"},
	{Name: "INVENTORY_EVENTS_RETENTION", Group: "Events and subscriptions", Default: "168h", Shown: "",
		Meaning: "how long stock events are kept for `after` cursors"},
	{Name: "INVENTORY_CODE_REVEAL_RETENTION", Group: "Events and subscriptions", Default: "9600h", Shown: "`9600h` (400 days)",
		Meaning: "how long each code-reveal audit row (`code_reveals`: who revealed an order line's codes, when, how many) is kept; older ones are deleted hourly by the `retention_prune` job, 1000 rows per transaction. 400 days because an auditor asks for a year of audit trail (PCI DSS 10.5.1 keeps audit logs at least 12 months) and an annual audit must still see the whole previous year when it comes late; it also outlasts card chargeback windows (typically 120 days), the time a \"the key never worked\" dispute needs the record. Orders and their lines are never pruned"},
	{Name: "INVENTORY_WEBHOOK_DELIVERY_RETENTION", Group: "Events and subscriptions", Default: "720h", Shown: "`720h` (30 days)",
		Meaning: "how long each webhook delivery log row (one per attempt and test send) is kept; older ones are deleted hourly by the `retention_prune` job, 1000 rows per transaction. The log is for debugging a receiver, not an audit record: 30 days outlasts a delivery's retries (about two days) and a month's investigation; it is the fastest-growing table (one row per endpoint, event and attempt)"},
	{Name: "INVENTORY_EVENTS_TICK", Group: "Events and subscriptions", Default: "25ms", Shown: "",
		Meaning: "how often committed events are published (at most one NOTIFY per tick); most of the in-memory availability copy's staleness"},
	{Name: "INVENTORY_EVENTS_RELAY_TIMEOUT", Group: "Events and subscriptions", Default: "5s", Shown: "",
		Meaning: "bounds the event relay's transaction, which holds the lock that lets one relay at a time (across instances) publish: each of its statements and lock waits, and each pause between them, at most this long, set in PostgreSQL for that transaction alone (`statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`; through PgBouncer too). An instance frozen inside it (SIGSTOP, a long GC pause, a hung VM) has its session ended by PostgreSQL this long after it went idle, and another instance publishes. At least 1s"},
	{Name: "INVENTORY_EVENTS_MAX_STALL", Group: "Events and subscriptions", Default: "30s", Shown: "",
		Meaning: "`/readyz` answers 503 (\"live events stalled\") while committed stock changes have waited longer than this to be published: the relay is stuck on every instance (a frozen relay is cut off within twice `INVENTORY_EVENTS_RELAY_TIMEOUT`, which this must exceed). Every instance sees the same stream, so all of them turn unready: alert on `inventory_relay_lag_seconds` first. `0`: never reported"},
	{Name: "INVENTORY_AVAILABILITY_MAX_LAG", Group: "Events and subscriptions", Default: "1s", Shown: "",
		Meaning: "how stale each instance's in-memory copy of the balances may be and still answer `availability` (no database read); staler (the relay stalled, the copy loading), it is answered from the database. Exported as `inventory_availability_lag_seconds`. `0` answers every `availability` from the database"},
	{Name: "INVENTORY_SUBSCRIBER_BUFFER", Group: "Events and subscriptions", Default: "256", Shown: "",
		Meaning: "events buffered per subscriber"},
	{Name: "INVENTORY_SUBSCRIBER_STALL_TIMEOUT", Group: "Events and subscriptions", Default: "10s", Shown: "",
		Meaning: "a subscriber whose buffer stays full this long is disconnected; an SSE subscription whose write has not gone out this long is ended (a client that stopped reading holds nothing)"},
	{Name: "INVENTORY_SUBSCRIPTION_FLUSH", Group: "Events and subscriptions", Default: "5ms", Shown: "",
		Meaning: "how long a group of identical subscriptions collects new messages before its subscribers write them: each subscriber's pending messages leave in one socket write per flush, not one per event (availabilityChanged ticks wait 1 ms). Longer: fewer writes, later delivery; at most 1s"},
	{Name: "INVENTORY_WS_INIT_TIMEOUT", Group: "Events and subscriptions", Default: "10s", Shown: "",
		Meaning: "a WebSocket that sends no `connection_init` in time is closed"},
	{Name: "INVENTORY_WS_KEEPALIVE", Group: "Events and subscriptions", Default: "10s", Shown: "",
		Meaning: "WebSocket ping interval; a peer that does not answer within two intervals, or takes no byte of a write for two intervals, is dropped"},
	{Name: "INVENTORY_WS_MAX_SUBSCRIPTIONS", Group: "Events and subscriptions", Default: "20", Shown: "",
		Meaning: "live subscriptions on one WebSocket"},
	{Name: "INVENTORY_WS_MAX_IN_FLIGHT", Group: "Events and subscriptions", Default: "10", Shown: "",
		Meaning: "queries and mutations running at once on one WebSocket; one more is answered at once with a `RATE_LIMITED` error (the socket stays open). Each operation on a socket also spends its caller's rate limit and gets `INVENTORY_REQUEST_TIMEOUT`, as over HTTP"},
	{Name: "INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER", Group: "Events and subscriptions", Default: "200", Shown: "",
		Meaning: "live subscriptions of one key or checkout on one instance, over all its sockets and SSE streams"},
	{Name: "INVENTORY_ANONYMOUS_MAX_SOCKETS", Group: "Events and subscriptions", Default: "100", Shown: "",
		Meaning: "WebSockets without a token (product pages watching `availabilityChanged`) one client IP (IPv6: per /64) may hold open on one instance; one more is closed with `4429` at `connection_init`"},
	{Name: "INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS", Group: "Events and subscriptions", Default: "200", Shown: "",
		Meaning: "live subscriptions without a token of one client IP (IPv6: per /64) on one instance, over all its sockets and SSE streams; one more is refused with `BAD_REQUEST`. Each also spends an anonymous read (`INVENTORY_RATE_LIMIT_ANONYMOUS_READS`)"},
	{Name: "INVENTORY_AVAILABILITY_PUSH_INTERVAL", Group: "Events and subscriptions", Default: "250ms", Shown: "",
		Meaning: "`availabilityChanged` sends each SKU at most once per interval: the changes of one interval are one message with the newest value (and each changed SKU is read once per interval per subscription). 10ms to 10s"},
	{Name: "INVENTORY_WEBHOOK_ALLOW_PRIVATE", Group: "Events and subscriptions", Default: "false", Shown: "",
		Meaning: "`true` lets webhook URLs name, or resolve to, loopback, private, link-local and every other address that is not public unicast (for tests and closed networks). Otherwise every entry of the IANA IPv4 and IPv6 special-purpose registries is refused (NAT64, 6to4, Teredo, benchmarking, documentation, CGNAT, IPv4-mapped forms, …) and multicast: literal addresses when a webhook is saved, every resolved address at every connection (DNS rebinding cannot pass); a refusal never names the resolved address. Only this environment setting enables it, nothing in the API"},
	{Name: "INVENTORY_METRICS_ADDR", Group: "Operations", Default: "", Shown: "(off)",
		Meaning: "also serve `/metrics` on this address without a key, for a Prometheus scraper; keep it private"},
	{Name: "INVENTORY_PPROF_ADDR", Group: "Operations", Default: "", Shown: "(off)",
		Meaning: "serve Go's profiler (`/debug/pprof/`) on this address, e.g. `127.0.0.1:6060`, for `go tool pprof`; keep it private"},
	{Name: "INVENTORY_LOG_LEVEL", Group: "Operations", Default: "info", Shown: "",
		Meaning: "`debug`, `info`, `warn`, `error`. At `info` the log has one line per request (`method`, `path`, GraphQL `operation`, `status`, `duration`, `request_id`, caller `role`, and `trace_id` when tracing is on; never a token, variable or code; a WebSocket's line when it closes); River's routine lines are at `debug`",
		Brief:   "debug, info, warn or error"},
}

// Markdown renders the settings as docs/configuration.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from config/settings.go by go generate (inventory settings); do not edit. -->

Everything comes from the environment; ` + "`inventory --help`" + ` names the essentials.
Invalid values are refused at start-up, all at once, naming the variable and
what it accepts.
`)
	group := ""
	for _, s := range Settings {
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(&b, "\n## %s\n\n| variable | default | meaning |\n|---|---|---|\n", group)
		}
		def := s.Shown
		if def == "" {
			def = "`" + s.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, def, s.Meaning)
	}
	b.WriteString(tracingSettings)
	return b.String()
}

// tracingSettings are OpenTelemetry's own variables, read by its SDK as
// every OpenTelemetry SDK reads them (package tracing), so they are listed
// here rather than parsed with the rest.
const tracingSettings = `
## Tracing (OpenTelemetry)

Off unless an OTLP endpoint is named; off, no exporter starts and no request,
statement or job is wrapped. [Tracing](operations/tracing.md) shows what a
trace holds.

| variable | default | meaning |
|---|---|---|
| ` + "`OTEL_EXPORTER_OTLP_ENDPOINT`" + ` | (off) | the collector, e.g. ` + "`http://otel-collector:4318`" + `; spans go to its ` + "`/v1/traces`" + ` as OTLP over HTTP (protobuf). Setting it turns tracing on |
| ` + "`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`" + ` | (off) | the full traces URL instead, used as given; also turns tracing on |
| ` + "`OTEL_EXPORTER_OTLP_HEADERS`" + `, ` + "`OTEL_EXPORTER_OTLP_TIMEOUT`" + `, ` + "`OTEL_EXPORTER_OTLP_COMPRESSION`" + `, ` + "`OTEL_EXPORTER_OTLP_CERTIFICATE`" + ` | | the exporter's headers (a vendor's API key), timeout, ` + "`gzip`" + `, and TLS, as the OpenTelemetry specification defines them |
| ` + "`OTEL_EXPORTER_OTLP_PROTOCOL`" + ` | ` + "`http/protobuf`" + ` | only ` + "`http/protobuf`" + ` is built in; ` + "`grpc`" + ` is refused at start-up |
| ` + "`OTEL_TRACES_EXPORTER`" + ` | (unset) | ` + "`otlp`" + ` turns tracing on, at ` + "`http://localhost:4318`" + ` unless an endpoint is named; ` + "`none`" + ` turns it off; others are refused at start-up |
| ` + "`OTEL_SDK_DISABLED`" + ` | ` + "`false`" + ` | ` + "`true`" + ` turns tracing off whatever else is set |
| ` + "`OTEL_SERVICE_NAME`" + ` | ` + "`inventory`" + ` | the ` + "`service.name`" + ` of every span; ` + "`OTEL_RESOURCE_ATTRIBUTES`" + ` adds others (` + "`deployment.environment.name=prod`" + `) |
| ` + "`OTEL_TRACES_SAMPLER`" + `, ` + "`OTEL_TRACES_SAMPLER_ARG`" + ` | ` + "`parentbased_always_on`" + ` | which requests are traced; in production ` + "`parentbased_traceidratio`" + ` with e.g. ` + "`0.01`" + `. A parent's decision is followed only for service and admin keys: nobody else's ` + "`traceparent`" + ` is read |
| ` + "`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`" + ` | ` + "`1024`" + ` | bytes kept of each attribute value (OpenTelemetry's own default is no bound; a caller's headers become attributes) |
| ` + "`OTEL_BSP_SCHEDULE_DELAY`" + `, ` + "`OTEL_BSP_MAX_QUEUE_SIZE`" + `, ` + "`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`" + ` | ` + "`5000`" + `, ` + "`2048`" + `, ` + "`512`" + ` | the export batching: milliseconds between exports, spans buffered (more are dropped, never waited for), spans per export |
`
