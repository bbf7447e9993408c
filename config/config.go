package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"inventory/api"
	"inventory/auth"
	"inventory/codecrypt"
	"inventory/domain"
	"inventory/events"
	"inventory/fanout"
)

// Config is the server's whole configuration, read from the environment.
// docs/configuration.md (generated from Settings) lists every variable with
// its default.
type Config struct {
	DatabaseURL        string         // DATABASE_URL (required): request traffic, may be PgBouncer in transaction mode
	DatabaseDirectURL  string         // DATABASE_DIRECT_URL: what needs a session (migrations, LISTEN, River); DATABASE_URL when unset
	DBPooler           string         // INVENTORY_DB_POOLER: "none" or "transaction" (DATABASE_URL is PgBouncer in transaction mode)
	DBDirectConns      int32          // INVENTORY_DB_DIRECT_CONNS: River's own pool on DATABASE_DIRECT_URL, when that is set
	DatabaseReplicaURL string         // DATABASE_REPLICA_URL: a streaming standby for storefront reads; none when unset
	DBReplicaConns     int32          // INVENTORY_DB_REPLICA_CONNS: the standby's pool
	ReplicaMaxLag      time.Duration  // INVENTORY_REPLICA_MAX_LAG: past it the primary answers
	ListenAddr         string         // LISTEN_ADDR
	TokenSecret        string         // INVENTORY_TOKEN_SECRET: secret[,older secret…] (required to serve; each >= 32 bytes)
	CodesKey           string         // INVENTORY_CODES_KEY: id:base64key[,id:base64key…], first encrypts
	CodesHMACKey       string         // INVENTORY_CODES_HMAC_KEY: base64, never rotated
	DBMaxConns         int32          // INVENTORY_DB_MAX_CONNS: the request pool
	DBJobConns         int32          // INVENTORY_DB_JOB_CONNS: River's pool
	DBEventConns       int32          // INVENTORY_DB_EVENT_CONNS: the event relay's pool
	DBStatementTimeout time.Duration  // INVENTORY_DB_STATEMENT_TIMEOUT
	DBLockTimeout      time.Duration  // INVENTORY_DB_LOCK_TIMEOUT
	MaxBodyBytes       int64          // INVENTORY_MAX_BODY_BYTES
	MaxUploadBytes     int64          // INVENTORY_MAX_UPLOAD_BYTES
	MaxComplexity      int            // INVENTORY_MAX_COMPLEXITY
	MaxQueryTokens     int            // INVENTORY_MAX_QUERY_TOKENS
	AnswerCaps         api.AnswerCaps // INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS, INVENTORY_MAX_ANSWER_BYTES
	QueryCacheBytes    int64          // INVENTORY_QUERY_CACHE_BYTES
	DBAnonymousConns   int            // INVENTORY_DB_ANONYMOUS_CONNS: of DBMaxConns, what anonymous callers may use at once
	ShutdownTimeout    time.Duration  // INVENTORY_SHUTDOWN_TIMEOUT
	MigrateOnStart     bool           // INVENTORY_MIGRATE_ON_START
	ReconcileInterval  time.Duration  // INVENTORY_RECONCILE_INTERVAL
	SweepInterval      time.Duration  // INVENTORY_SWEEP_INTERVAL
	SweepGrace         time.Duration  // INVENTORY_SWEEP_GRACE
	JobWorkers         int            // INVENTORY_JOB_WORKERS
	RunJobs            bool           // INVENTORY_RUN_JOBS: false serves the API without working River jobs (they wait for an instance that does)
	EventsRetention    time.Duration  // INVENTORY_EVENTS_RETENTION
	// CodeRevealRetention and WebhookDeliveryRetention are
	// INVENTORY_CODE_REVEAL_RETENTION and INVENTORY_WEBHOOK_DELIVERY_RETENTION:
	// how long code-reveal audit rows and webhook delivery log rows are kept.
	CodeRevealRetention      time.Duration
	WebhookDeliveryRetention time.Duration
	Events                   events.Config // INVENTORY_EVENTS_TICK, INVENTORY_SUBSCRIBER_BUFFER, INVENTORY_SUBSCRIBER_STALL_TIMEOUT, INVENTORY_EVENTS_RELAY_TIMEOUT, INVENTORY_EVENTS_MAX_STALL
	SubscriptionFlush        time.Duration // INVENTORY_SUBSCRIPTION_FLUSH
	AvailabilityMaxLag       time.Duration // INVENTORY_AVAILABILITY_MAX_LAG: 0 answers availability from the database only
	LogLevel                 string        // INVENTORY_LOG_LEVEL: debug, info, warn, error
	WSKeepAlive              time.Duration // INVENTORY_WS_KEEPALIVE
	WSInitTimeout            time.Duration // INVENTORY_WS_INIT_TIMEOUT
	WSMaxInFlight            int           // INVENTORY_WS_MAX_IN_FLIGHT: queries and mutations at once on one socket
	HTTPHeaderTimeout        time.Duration // INVENTORY_HTTP_HEADER_TIMEOUT: a request's headers
	HTTPReadTimeout          time.Duration // INVENTORY_HTTP_READ_TIMEOUT: a plain request's body
	HTTPWriteTimeout         time.Duration // INVENTORY_HTTP_WRITE_TIMEOUT: a plain request's answer
	RequestTimeout           time.Duration // INVENTORY_REQUEST_TIMEOUT: a plain request's whole handling
	HTTPIdleTimeout          time.Duration // INVENTORY_HTTP_IDLE_TIMEOUT: an idle keep-alive connection
	KeyCacheTTL              time.Duration // INVENTORY_KEY_CACHE_TTL: how long a live API key is trusted without a database read
	AdminSessionTTL          time.Duration // INVENTORY_ADMIN_SESSION_TTL: how long an /admin sign-in lasts
	MetricsAddr              string        // INVENTORY_METRICS_ADDR: also serve /metrics there, without a key (off when empty)
	PprofAddr                string        // INVENTORY_PPROF_ADDR: serve Go's profiler there (off when empty)
	// WebhookAllowPrivate is INVENTORY_WEBHOOK_ALLOW_PRIVATE: webhook URLs may
	// reach loopback and private addresses.
	WebhookAllowPrivate bool
	// FairUse: INVENTORY_CHECKOUT_MAX_HOLD_TTL, INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME,
	// INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU, INVENTORY_CHECKOUT_MAX_LIVE_HOLDS,
	// INVENTORY_CHECKOUT_MAX_WAITLIST_TTL.
	FairUse domain.FairUse
	// CheckoutTokenMaxTTL is INVENTORY_CHECKOUT_TOKEN_MAX_TTL: the longest
	// checkout token issueCheckoutToken mints.
	CheckoutTokenMaxTTL time.Duration
	// TrustedProxies is INVENTORY_TRUSTED_PROXIES: comma-separated CIDR
	// prefixes of the proxies whose X-Forwarded-For names the client.
	TrustedProxies []string
	// MaxBytesInFlightPerIP is INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP: bytes
	// of bodies and answers one address has in flight; 0 is none.
	MaxBytesInFlightPerIP int64
	// MaxConnsPerIP is INVENTORY_MAX_CONNS_PER_IP: open connections per
	// client address at the listener (trusted proxies exempt); 0 is none.
	MaxConnsPerIP int
	// RateLimits: INVENTORY_RATE_LIMIT_WINDOW and
	// INVENTORY_RATE_LIMIT_{ANONYMOUS,CHECKOUT,KEY}_{READS,WRITES}.
	RateLimits api.RateLimits
	// Subscriptions: INVENTORY_WS_MAX_SUBSCRIPTIONS (per socket) and
	// INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER (per key or checkout, per instance).
	Subscriptions api.SubscriptionCaps
	// AvailabilityPushInterval is INVENTORY_AVAILABILITY_PUSH_INTERVAL: how
	// often availabilityChanged sends a SKU at most.
	AvailabilityPushInterval time.Duration
	// CORSOrigins is INVENTORY_CORS_ORIGINS: comma-separated origins
	// (https://shop.example) whose pages may call the API; none by default.
	CORSOrigins []string
	// CacheMaxAge is INVENTORY_CACHE_MAX_AGE: how long a CDN or browser may
	// reuse an anonymous GET query's answer (whole seconds).
	CacheMaxAge time.Duration
}

// Load reads the configuration through getenv (os.Getenv in main, a map in
// tests) and reports every invalid variable at once.
func Load(getenv func(string) string) (Config, error) {
	var errs []error
	str := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	num := func(name string, def int64) int64 {
		v := getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive integer, got %q", name, v))
		}
		return n
	}
	boolean := func(name string, def bool) bool {
		switch v := getenv(name); v {
		case "":
			return def
		case "true", "1", "yes":
			return true
		case "false", "0", "no":
			return false
		default:
			errs = append(errs, fmt.Errorf("%s must be true or false, got %q", name, v))
			return def
		}
	}
	dur := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 30s, got %q", name, v))
		}
		return d
	}
	// durOff is dur where 0 means off.
	durOff := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s must be 0 (off) or a positive duration such as 1s, got %q", name, v))
		}
		return d
	}
	cfg := Config{
		DatabaseURL:        getenv("DATABASE_URL"),
		DatabaseDirectURL:  getenv("DATABASE_DIRECT_URL"),
		DBPooler:           str("INVENTORY_DB_POOLER", "none"),
		DBDirectConns:      int32(min(num("INVENTORY_DB_DIRECT_CONNS", 4), 1000)),
		DatabaseReplicaURL: getenv("DATABASE_REPLICA_URL"),
		DBReplicaConns:     int32(min(num("INVENTORY_DB_REPLICA_CONNS", 4), 1000)),
		ReplicaMaxLag:      dur("INVENTORY_REPLICA_MAX_LAG", time.Second),
		ListenAddr:         str("LISTEN_ADDR", ":8080"),
		TokenSecret:        getenv("INVENTORY_TOKEN_SECRET"),
		CodesKey:           getenv("INVENTORY_CODES_KEY"),
		CodesHMACKey:       getenv("INVENTORY_CODES_HMAC_KEY"),
		DBMaxConns:         int32(min(num("INVENTORY_DB_MAX_CONNS", 20), 10_000)),
		DBEventConns:       int32(min(num("INVENTORY_DB_EVENT_CONNS", 4), 1000)),
		DBStatementTimeout: dur("INVENTORY_DB_STATEMENT_TIMEOUT", 30*time.Second),
		DBLockTimeout:      dur("INVENTORY_DB_LOCK_TIMEOUT", 10*time.Second),
		MaxBodyBytes:       num("INVENTORY_MAX_BODY_BYTES", 1<<20),
		MaxUploadBytes:     num("INVENTORY_MAX_UPLOAD_BYTES", 64<<20),
		MaxComplexity:      int(min(num("INVENTORY_MAX_COMPLEXITY", 20_000), 100_000_000)),
		MaxQueryTokens:     int(min(num("INVENTORY_MAX_QUERY_TOKENS", 10_000), 10_000_000)),
		QueryCacheBytes:    num("INVENTORY_QUERY_CACHE_BYTES", 32<<20),
		AnswerCaps: api.AnswerCaps{
			Anonymous:     num("INVENTORY_MAX_ANSWER_BYTES_ANONYMOUS", 4<<20),
			Authenticated: num("INVENTORY_MAX_ANSWER_BYTES", 64<<20),
		},
		ShutdownTimeout:          dur("INVENTORY_SHUTDOWN_TIMEOUT", 15*time.Second),
		MigrateOnStart:           boolean("INVENTORY_MIGRATE_ON_START", true),
		ReconcileInterval:        dur("INVENTORY_RECONCILE_INTERVAL", time.Hour),
		SweepInterval:            dur("INVENTORY_SWEEP_INTERVAL", 30*time.Second),
		SweepGrace:               dur("INVENTORY_SWEEP_GRACE", 15*time.Second),
		JobWorkers:               int(min(num("INVENTORY_JOB_WORKERS", 10), 1000)),
		RunJobs:                  boolean("INVENTORY_RUN_JOBS", true),
		EventsRetention:          dur("INVENTORY_EVENTS_RETENTION", 7*24*time.Hour),
		CodeRevealRetention:      dur("INVENTORY_CODE_REVEAL_RETENTION", 400*24*time.Hour),
		WebhookDeliveryRetention: dur("INVENTORY_WEBHOOK_DELIVERY_RETENTION", 30*24*time.Hour),
		Events: events.Config{
			Tick:         dur("INVENTORY_EVENTS_TICK", 25*time.Millisecond),
			Buffer:       int(min(num("INVENTORY_SUBSCRIBER_BUFFER", 256), 100_000)),
			StallTimeout: dur("INVENTORY_SUBSCRIBER_STALL_TIMEOUT", 10*time.Second),
			RelayTimeout: dur("INVENTORY_EVENTS_RELAY_TIMEOUT", 5*time.Second),
			MaxStall:     durOff("INVENTORY_EVENTS_MAX_STALL", 30*time.Second),
		},
		SubscriptionFlush:   min(dur("INVENTORY_SUBSCRIPTION_FLUSH", fanout.DefaultFlush), time.Second),
		AvailabilityMaxLag:  durOff("INVENTORY_AVAILABILITY_MAX_LAG", time.Second),
		LogLevel:            str("INVENTORY_LOG_LEVEL", "info"),
		WSKeepAlive:         dur("INVENTORY_WS_KEEPALIVE", 10*time.Second),
		WSInitTimeout:       dur("INVENTORY_WS_INIT_TIMEOUT", 10*time.Second),
		KeyCacheTTL:         dur("INVENTORY_KEY_CACHE_TTL", 500*time.Millisecond),
		AdminSessionTTL:     dur("INVENTORY_ADMIN_SESSION_TTL", 12*time.Hour),
		HTTPHeaderTimeout:   dur("INVENTORY_HTTP_HEADER_TIMEOUT", 10*time.Second),
		HTTPReadTimeout:     dur("INVENTORY_HTTP_READ_TIMEOUT", time.Minute),
		HTTPWriteTimeout:    dur("INVENTORY_HTTP_WRITE_TIMEOUT", time.Minute),
		HTTPIdleTimeout:     dur("INVENTORY_HTTP_IDLE_TIMEOUT", 2*time.Minute),
		RequestTimeout:      dur("INVENTORY_REQUEST_TIMEOUT", 30*time.Second),
		PprofAddr:           getenv("INVENTORY_PPROF_ADDR"),
		WebhookAllowPrivate: boolean("INVENTORY_WEBHOOK_ALLOW_PRIVATE", false),
		MetricsAddr:         getenv("INVENTORY_METRICS_ADDR"),
	}
	def := domain.DefaultFairUse
	secs := func(d time.Duration) int { return int(d / time.Second) }
	cfg.FairUse = domain.FairUse{
		MaxHoldTTL:      secs(dur("INVENTORY_CHECKOUT_MAX_HOLD_TTL", time.Duration(def.MaxHoldTTL)*time.Second)),
		MaxHoldLifetime: secs(dur("INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME", time.Duration(def.MaxHoldLifetime)*time.Second)),
		MaxUnitsPerSKU:  int(min(num("INVENTORY_CHECKOUT_MAX_UNITS_PER_SKU", int64(def.MaxUnitsPerSKU)), domain.MaxQuantity)),
		MaxLiveHolds:    int(min(num("INVENTORY_CHECKOUT_MAX_LIVE_HOLDS", int64(def.MaxLiveHolds)), 1_000_000)),
		MaxWaitlistTTL:  secs(dur("INVENTORY_CHECKOUT_MAX_WAITLIST_TTL", time.Duration(def.MaxWaitlistTTL)*time.Second)),
	}
	cfg.CheckoutTokenMaxTTL = dur("INVENTORY_CHECKOUT_TOKEN_MAX_TTL", 2*time.Hour)
	for name, d := range map[string]int{"INVENTORY_CHECKOUT_MAX_HOLD_TTL": cfg.FairUse.MaxHoldTTL,
		"INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME": cfg.FairUse.MaxHoldLifetime, "INVENTORY_CHECKOUT_TOKEN_MAX_TTL": secs(cfg.CheckoutTokenMaxTTL),
		"INVENTORY_CHECKOUT_MAX_WAITLIST_TTL": cfg.FairUse.MaxWaitlistTTL} {
		if d > domain.MaxHoldTTL || (d < 1 && getenv(name) != "") {
			errs = append(errs, fmt.Errorf("%s must be between 1s and 24h, got %q", name, getenv(name)))
		}
	}
	if cfg.FairUse.MaxHoldTTL > cfg.FairUse.MaxHoldLifetime {
		errs = append(errs, errors.New("INVENTORY_CHECKOUT_MAX_HOLD_TTL must not be longer than INVENTORY_CHECKOUT_MAX_HOLD_LIFETIME"))
	}
	for _, p := range strings.Split(getenv("INVENTORY_TRUSTED_PROXIES"), ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, err := netip.ParsePrefix(p); err != nil {
			errs = append(errs, fmt.Errorf("INVENTORY_TRUSTED_PROXIES must be comma-separated CIDR prefixes such as 10.0.0.0/8, got %q", p))
			continue
		}
		cfg.TrustedProxies = append(cfg.TrustedProxies, p)
	}
	for _, o := range strings.Split(getenv("INVENTORY_CORS_ORIGINS"), ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		if err := checkOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("INVENTORY_CORS_ORIGINS: %w", err))
			continue
		}
		cfg.CORSOrigins = append(cfg.CORSOrigins, o)
	}
	// A budget of 0 is no limit.
	cfg.MaxBytesInFlightPerIP = 16 << 20
	if v := getenv("INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("INVENTORY_MAX_BYTES_IN_FLIGHT_PER_IP must be a number of bytes (0: no limit), got %q", v))
		}
		cfg.MaxBytesInFlightPerIP = n
	}
	cfg.MaxConnsPerIP = 1024
	if v := getenv("INVENTORY_MAX_CONNS_PER_IP"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("INVENTORY_MAX_CONNS_PER_IP must be a number of connections (0: no limit), got %q", v))
		}
		cfg.MaxConnsPerIP = int(n)
	}
	budget := func(name string, def int64) int {
		v := getenv(name)
		if v == "" {
			return int(def)
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s must be a number of requests per window (0: no limit), got %q", name, v))
		}
		return int(n)
	}
	cfg.RateLimits = api.RateLimits{
		Window: dur("INVENTORY_RATE_LIMIT_WINDOW", time.Minute),
		Anonymous: api.Budget{Reads: budget("INVENTORY_RATE_LIMIT_ANONYMOUS_READS", 600),
			Writes: budget("INVENTORY_RATE_LIMIT_ANONYMOUS_WRITES", 60)},
		Checkout: api.Budget{Reads: budget("INVENTORY_RATE_LIMIT_CHECKOUT_READS", 600),
			Writes: budget("INVENTORY_RATE_LIMIT_CHECKOUT_WRITES", 120)},
		Key: api.Budget{Reads: budget("INVENTORY_RATE_LIMIT_KEY_READS", 0),
			Writes: budget("INVENTORY_RATE_LIMIT_KEY_WRITES", 0)},
		AuthFailures: budget("INVENTORY_RATE_LIMIT_AUTH_FAILURES", 20),
	}
	cfg.Subscriptions = api.SubscriptionCaps{
		PerSocket: int(min(num("INVENTORY_WS_MAX_SUBSCRIPTIONS", 20), 100_000)),
		PerCaller: int(min(num("INVENTORY_MAX_SUBSCRIPTIONS_PER_CALLER", 200), 10_000_000)),
		// INVENTORY_ANONYMOUS_MAX_{SOCKETS,SUBSCRIPTIONS}: per client IP.
		AnonymousSocketsPerIP: int(min(num("INVENTORY_ANONYMOUS_MAX_SOCKETS", 100), 10_000_000)),
		AnonymousPerIP:        int(min(num("INVENTORY_ANONYMOUS_MAX_SUBSCRIPTIONS", 200), 10_000_000)),
	}
	cfg.AvailabilityPushInterval = dur("INVENTORY_AVAILABILITY_PUSH_INTERVAL", 250*time.Millisecond)
	if d := cfg.AvailabilityPushInterval; d > 0 && (d < 10*time.Millisecond || d > 10*time.Second) {
		errs = append(errs, fmt.Errorf("INVENTORY_AVAILABILITY_PUSH_INTERVAL must be between 10ms and 10s, got %q", getenv("INVENTORY_AVAILABILITY_PUSH_INTERVAL")))
	}
	// A relay statement takes milliseconds; under a second, a loaded
	// machine's pause could end a healthy relay's session. Readiness must
	// not report a stall that a frozen relay's cut-off (at most twice the
	// timeout: its statement, then its pause) and another instance's
	// takeover end by themselves.
	if d := cfg.Events.RelayTimeout; d > 0 && d < time.Second {
		errs = append(errs, fmt.Errorf("INVENTORY_EVENTS_RELAY_TIMEOUT must be at least 1s, got %q", getenv("INVENTORY_EVENTS_RELAY_TIMEOUT")))
	}
	if stall := cfg.Events.MaxStall; stall > 0 && stall <= 2*cfg.Events.RelayTimeout {
		errs = append(errs, fmt.Errorf("INVENTORY_EVENTS_MAX_STALL must be longer than twice INVENTORY_EVENTS_RELAY_TIMEOUT (%s) or 0 (off), got %q", cfg.Events.RelayTimeout, getenv("INVENTORY_EVENTS_MAX_STALL")))
	} else if stall == 0 {
		cfg.Events.MaxStall = -1 // events.Config: never reported
	}
	cfg.WSMaxInFlight = int(min(num("INVENTORY_WS_MAX_IN_FLIGHT", 10), 100_000))
	cfg.CacheMaxAge = dur("INVENTORY_CACHE_MAX_AGE", 5*time.Second)
	if cfg.CacheMaxAge > 0 && (cfg.CacheMaxAge < time.Second || cfg.CacheMaxAge > time.Hour || cfg.CacheMaxAge%time.Second != 0) {
		errs = append(errs, fmt.Errorf("INVENTORY_CACHE_MAX_AGE must be whole seconds between 1s and 1h, got %q", getenv("INVENTORY_CACHE_MAX_AGE")))
	}
	switch cfg.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("INVENTORY_LOG_LEVEL must be debug, info, warn or error, got %q", cfg.LogLevel))
	}
	// River needs a connection per worker plus a few for its producer,
	// leader election and maintenance.
	cfg.DBJobConns = int32(min(num("INVENTORY_DB_JOB_CONNS", int64(cfg.JobWorkers)+5), 10_000))
	// Anonymous callers get a fifth of the request pool by default, at most
	// 4 (each runs a query flat out: past a few, they take the database's
	// CPU from everyone else however many connections are left), and never
	// all of it.
	cfg.DBAnonymousConns = int(num("INVENTORY_DB_ANONYMOUS_CONNS", int64(min(4, max(1, cfg.DBMaxConns/5)))))
	if most := max(1, int(cfg.DBMaxConns)-1); cfg.DBAnonymousConns > most {
		errs = append(errs, fmt.Errorf("INVENTORY_DB_ANONYMOUS_CONNS must be at most INVENTORY_DB_MAX_CONNS - 1 (%d): callers with a token keep the rest, got %q", most, getenv("INVENTORY_DB_ANONYMOUS_CONNS")))
	}
	if cfg.DatabaseURL == "" {
		errs = append(errs, errors.New("DATABASE_URL is not set: in a shell next to make run, load its settings first: set -a; . .data/dev.env; set +a (or set DATABASE_URL to your PostgreSQL)"))
	}
	switch cfg.DBPooler {
	case "none", "transaction":
	default:
		errs = append(errs, fmt.Errorf("INVENTORY_DB_POOLER must be none or transaction, got %q", cfg.DBPooler))
	}
	if cfg.DBPooler == "transaction" && cfg.DatabaseDirectURL == "" {
		errs = append(errs, errors.New("INVENTORY_DB_POOLER=transaction needs DATABASE_DIRECT_URL: migrations, LISTEN and River's job client need a session, which a transaction pooler does not keep"))
	}
	if cfg.DBDirectConns < 2 {
		errs = append(errs, fmt.Errorf("INVENTORY_DB_DIRECT_CONNS must be at least 2 (River holds one for LISTEN), got %q", getenv("INVENTORY_DB_DIRECT_CONNS")))
	}
	return cfg, errors.Join(errs...)
}

// TokenSecrets parses the token key ring (the first signs, all verify); the
// commands that verify or issue tokens need it.
func (c Config) TokenSecrets() ([][]byte, error) {
	if strings.TrimSpace(c.TokenSecret) == "" {
		return nil, fmt.Errorf("INVENTORY_TOKEN_SECRET must be set to at least %d bytes (e.g. openssl rand -hex 32)", auth.MinSecretLength)
	}
	return auth.ParseTokenSecrets(c.TokenSecret)
}

// Keyring parses the code keys; commands that seal or open codes need it.
func (c Config) Keyring() (*codecrypt.Keyring, error) {
	k, err := codecrypt.ParseKeyring(c.CodesKey, c.CodesHMACKey)
	if err != nil {
		return nil, fmt.Errorf("%w (make run generates development keys; see README)", err)
	}
	return k, nil
}

// checkOrigin accepts an exact browser origin, scheme://host[:port]: no
// wildcard (the allowlist is explicit), no path.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("%q is not an origin such as https://shop.example", o)
	case strings.ContainsAny(o, "*?[]\\"):
		return fmt.Errorf("%q: wildcards are not allowed; list each origin", o)
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%q: an origin is scheme://host[:port], nothing more", o)
	}
	return nil
}
