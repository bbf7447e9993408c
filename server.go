// Command inventory is the inventory reservation server and its CLI:
//
//	inventory [serve]                          run the GraphQL server
//	inventory migrate [status]                 apply (or list) database migrations
//	inventory token create --role R --name N   create an admin/service key (secret on the last line)
//	inventory token revoke NAME                revoke a key
//	inventory import --sku S --location L --batch REF FILE   import codes for a CODES SKU
//	inventory reconcile                        report stock invariants that do not hold
//	inventory demo                             load the demo catalog into an empty database
//	inventory version                          print the build's version and commit
//	inventory help [COMMAND], COMMAND -h       usage; touches nothing
//
// Configuration comes from the environment; see config.go and README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"inventory/api"
	"inventory/auth"
	"inventory/avail"
	"inventory/domain"
	"inventory/events"
	"inventory/fanout"
	"inventory/jobs"
	"inventory/metrics"
	"inventory/migrations"
	"inventory/replica"
	"inventory/resolvers"
	"inventory/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		var usage usageError
		if errors.As(err, &usage) {
			os.Exit(2) // run printed the error and the usage
		}
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
}

// server is a running instance: HTTP listener, River client and pools.
type server struct {
	URL    string
	done   chan error
	logger *slog.Logger
}

// startServer wires the whole application, starts serving on cfg.ListenAddr
// (":0" picks a free port; URL says which) and shuts down gracefully when ctx
// ends: stop accepting, finish in-flight requests, stop River, close the pools.
func startServer(ctx context.Context, cfg config, logger *slog.Logger) (*server, error) {
	secrets, err := cfg.tokenSecrets()
	if err != nil {
		return nil, err
	}
	tokens, err := auth.NewCheckoutTokens(secrets...)
	if err != nil {
		return nil, err
	}
	tokens.MaxTTL = int(cfg.CheckoutTokenMaxTTL / time.Second)
	keyring, err := cfg.keyring()
	if err != nil {
		return nil, err
	}
	db, err := openPools(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// aux carries what runs beside the API (River UI's background work, the
	// private metrics and profiler listeners): it ends after HTTP drained,
	// or at once if starting fails.
	aux, stopAux := context.WithCancel(context.WithoutCancel(ctx))
	// Requests must not inherit the signal's cancellation: Shutdown lets the
	// in-flight ones finish. Every request goes through gate, which answers
	// 503 until the application is built (only while waiting for migrations
	// is anything served before that).
	baseCtx := context.WithoutCancel(ctx)
	gate := &startGate{}
	httpServer := &http.Server{Handler: gate, ReadHeaderTimeout: cfg.HTTPHeaderTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
		BaseContext: func(net.Listener) context.Context { return baseCtx }}
	serveErr := make(chan error, 1)
	var ln net.Listener
	listen := func() error {
		var err error
		if ln, err = net.Listen("tcp", cfg.ListenAddr); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.ListenAddr, err)
		}
		ln = api.NewConnLimit(ln, cfg.MaxConnsPerIP, cfg.TrustedProxies)
		go func() { serveErr <- httpServer.Serve(ln) }()
		return nil
	}
	ok := false
	defer func() {
		if !ok {
			if ln != nil {
				_ = httpServer.Close()
			}
			stopAux()
			db.close()
		}
	}()
	if cfg.MigrateOnStart {
		applied, err := migrations.Up(ctx, db.river, logger)
		if err != nil {
			return nil, err
		}
		if len(applied) > 0 {
			logger.Info("applied migrations", "count", len(applied), "last", applied[len(applied)-1].String())
		}
	}
	// Without migrations on start, an instance whose database is behind
	// serves /healthz, and /readyz 503 saying to run `inventory migrate`,
	// until another process has migrated it; nothing reads a table before.
	if !cfg.MigrateOnStart {
		reason, err := migrations.Pending(ctx, db.river)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			if err := listen(); err != nil {
				return nil, err
			}
			logger.Warn("waiting for the database to be migrated (INVENTORY_MIGRATE_ON_START=false)", "reason", reason, "url", "http://"+ln.Addr().String())
			if err := waitMigrated(ctx, db.api, gate, reason); err != nil {
				return nil, err
			}
		}
	}
	// One store per pool: what requests do, what jobs do, what the relay
	// does, each on connections of its own.
	st, err := newStore(db.api)
	if err != nil {
		return nil, err
	}
	st.Keyring = keyring
	st.WebhookAllowPrivate = cfg.WebhookAllowPrivate
	st.Logger = logger
	if err := st.CodesKeyCheck(ctx); err != nil {
		return nil, err
	}
	// Webhook secrets from before they were sealed are sealed now, so no
	// plaintext secret outlives the upgrade; one sealed under a key that is
	// not configured stops start-up here, like a code's.
	if n, err := st.WebhookSecretsSeal(ctx); err != nil {
		return nil, fmt.Errorf("webhook secrets: %w", err)
	} else if n > 0 {
		logger.Info("sealed webhook secrets under the current codes key", "endpoints", n, "key_id", keyring.CurrentKeyID())
	}
	jobStore, err := newStore(db.jobs)
	if err != nil {
		return nil, err
	}
	jobStore.Keyring = keyring
	eventStore, err := newStore(db.events)
	if err != nil {
		return nil, err
	}
	eventsCfg := cfg.Events
	eventsCfg.Listen = db.listen
	broker := events.NewBroker(eventStore, db.events, eventsCfg, logger)
	// Identical subscriptions run once for all their subscribers; a member
	// may fall behind as far as a broker subscriber may.
	fan := fanout.New(fanout.Config{Backlog: cfg.Events.Buffer, StallTimeout: cfg.Events.StallTimeout, Flush: cfg.SubscriptionFlush, Report: resolvers.ReportSubscriptionEnd})
	m := metrics.New(liveSubscriptions{Broker: broker, fan: fan})
	m.WatchFanout(fan)
	// The in-memory availability copy follows the broker's stream; nil
	// (INVENTORY_AVAILABILITY_MAX_LAG=0) answers from the database only.
	// With a standby, storefront reads go there while it is fresh
	// (replica_reads.go).
	var copyStore avail.Store = eventStore
	var stock domain.Stock = st
	if db.replica != nil {
		reads := &replicaReads{standby: store.New(db.replica), logger: logger}
		reads.monitor = replica.New(eventStore, reads.standby, replica.Config{MaxLag: cfg.ReplicaMaxLag}, logger)
		go reads.monitor.Run(aux)
		m.WatchReplica(reads.monitor, reads.Reads)
		copyStore = copySource{Store: eventStore, reads: reads}
		stock = standbyStock{Stock: st, reads: reads}
	}
	var availCopy *avail.Copy
	if cfg.AvailabilityMaxLag > 0 {
		availCopy = avail.New(copyStore, broker, avail.Config{MaxLag: cfg.AvailabilityMaxLag, OnApply: m.AvailabilityApplied}, logger)
		m.WatchAvailability(availCopy)
	}
	availStock := avail.Stock{Stock: stock, Copy: availCopy}
	m.WatchBatching(st)
	m.WatchOperations(st)
	m.WatchPools(db.all())
	onWebhookAttempt := m.WatchWebhooks(st)
	// Offers are made by API requests and by jobs (expiry, sweeper): both
	// stores report them.
	waitlistHooks := m.WatchWaitlists(st)
	st.SetWaitlistHooks(waitlistHooks)
	jobStore.SetWaitlistHooks(waitlistHooks)
	riverClient, err := jobs.NewClient(db.river, jobs.Config{
		Reconciler: jobStore, Expirer: jobStore, Sweeper: jobStore, EventsPruner: jobStore, EventsRetention: cfg.EventsRetention,
		Logger: logger, MaxWorkers: cfg.JobWorkers,
		ReconcileInterval: cfg.ReconcileInterval, SweepInterval: cfg.SweepInterval, SweepGrace: cfg.SweepGrace,
		OnSweep: m.SweptHolds, OnReconcile: m.Reconciled,
		RetentionPruner: jobStore, CodeRevealRetention: cfg.CodeRevealRetention, WebhookDeliveryRetention: cfg.WebhookDeliveryRetention,
		OnPruned: m.WatchRetention(jobs.TableCodeReveals, jobs.TableWebhookDeliveries),
		Webhooks: jobStore, WebhookAllowPrivate: cfg.WebhookAllowPrivate, OnWebhookAttempt: onWebhookAttempt,
		// Half the shutdown budget for jobs to finish, then they are
		// cancelled, so River has stopped (and recorded every job's end)
		// before the shutdown deadline.
		SoftStopTimeout: cfg.ShutdownTimeout / 2,
	})
	if err != nil {
		return nil, err
	}
	riverUI, err := newRiverUI(aux, riverClient, logger)
	if err != nil {
		return nil, err
	}
	// Bearer keys go through the key cache (revoking one takes effect
	// within KeyCacheTTL); admin sessions are read from the database on
	// every request, so sign-out holds at once on every instance.
	keys := &auth.KeyCache{Keys: st, MaxAge: cfg.KeyCacheTTL}
	m.WatchKeyReads(keys)
	sessions, err := auth.NewSessions(st, cfg.AdminSessionTTL, secrets...)
	if err != nil {
		return nil, err
	}
	var answers api.AnswerValidator
	if availCopy != nil {
		answers = availCopy
	}
	// Anonymous reads, availabilityChanged's included, share a bounded
	// part of the request pool; availabilityChanged reads memory first.
	anonymousShare := api.NewAnonymousShare(cfg.DBAnonymousConns)
	var liveMemory resolvers.AvailabilityMemory
	if availCopy != nil {
		liveMemory = availCopy
	}
	router := api.NewRouter(api.Config{
		Answers: answers,
		Resolver: &resolvers.Resolver{Catalog: avail.Catalog{Catalog: st, Copy: availCopy}, Stock: availStock, Reconciler: st, Reservations: metrics.Reservations{Reservations: st, Metrics: m}, UnitCodes: st,
			Waitlists: st, WaitlistFeed: st, WaitlistSignals: broker, WaitlistOverview: st,
			Events: st, Broker: broker, Tokens: tokens, FairUse: cfg.FairUse, Webhooks: st,
			Live: st, LiveShare: anonymousShare, LiveMemory: liveMemory, PushInterval: cfg.AvailabilityPushInterval,
			WebhookTester: &jobs.WebhookTester{Store: st, AllowPrivate: cfg.WebhookAllowPrivate}},
		Authenticator: &auth.Authenticator{Keys: keys, Checkout: tokens, Sessions: sessions},
		Ready:         (&readiness{broker: broker, pool: db.api, logger: logger, metrics: m}).check,
		Logger:        logger,
		GraphQL: api.GraphQLConfig{MaxComplexity: cfg.MaxComplexity, MaxTokens: cfg.MaxQueryTokens, DocumentCacheBytes: cfg.QueryCacheBytes,
			AnswerCaps:     cfg.AnswerCaps,
			AnonymousShare: anonymousShare,
			MaxUploadBytes: cfg.MaxUploadBytes,
			KeepAlive:      cfg.WSKeepAlive, InitTimeout: cfg.WSInitTimeout, Subscriptions: cfg.Subscriptions, Fanout: fan},
		MaxBodyBytes:      cfg.MaxBodyBytes,
		BytesInFlight:     api.NewBytesInFlight(cfg.MaxBytesInFlightPerIP),
		Metrics:           m,
		RiverUI:           riverUI,
		Deadlines:         api.Deadlines{Read: cfg.HTTPReadTimeout, Write: cfg.HTTPWriteTimeout, Handle: cfg.RequestTimeout},
		TrustedProxies:    cfg.TrustedProxies,
		RateLimits:        cfg.RateLimits,
		SocketMaxInFlight: cfg.WSMaxInFlight,
		CORSOrigins:       cfg.CORSOrigins,
		CacheMaxAge:       cfg.CacheMaxAge,
	})
	if cfg.PprofAddr != "" {
		if err := servePrivate(aux, "profiler", cfg.PprofAddr, pprofHandler(), logger); err != nil {
			return nil, fmt.Errorf("INVENTORY_PPROF_ADDR: %w", err)
		}
	}
	if cfg.MetricsAddr != "" {
		if err := servePrivate(aux, "metrics", cfg.MetricsAddr, m.Handler(), logger); err != nil {
			return nil, fmt.Errorf("INVENTORY_METRICS_ADDR: %w", err)
		}
	}
	if ln == nil {
		if err := listen(); err != nil {
			return nil, err
		}
	}
	// River runs on its own context so that shutdown can stop it after HTTP
	// has drained, not at the same moment as the signal.
	// An instance with INVENTORY_RUN_JOBS=false still inserts jobs (expiry of
	// its holds); other instances work them.
	dispatchCtx, stopDispatch := context.WithCancel(context.WithoutCancel(ctx))
	dispatchDone := make(chan struct{})
	if cfg.RunJobs {
		if err := riverClient.Start(context.WithoutCancel(ctx)); err != nil {
			stopDispatch()
			return nil, fmt.Errorf("start river: %w", err)
		}
		dispatcher := &jobs.WebhookDispatcher{Store: jobStore, Client: riverClient, Logger: logger}
		go func() { defer close(dispatchDone); dispatcher.Run(dispatchCtx) }()
	} else {
		close(dispatchDone)
	}
	ok = true
	// The broker stops first at shutdown, so live subscriptions end (and
	// their sockets close) before the pool they read from.
	brokerCtx, stopBroker := context.WithCancel(context.WithoutCancel(ctx))
	brokerDone := make(chan error, 1)
	go func() { brokerDone <- broker.Run(brokerCtx) }()
	copyDone := make(chan struct{})
	go func() {
		defer close(copyDone)
		if availCopy != nil {
			availCopy.Run(brokerCtx)
		}
	}()
	gate.open(router)
	s := &server{URL: "http://" + ln.Addr().String(), done: make(chan error, 1), logger: logger}
	go func() {
		var err error
		select {
		case <-ctx.Done():
		case err = <-serveErr:
		}
		logger.Info("shutting down")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		stopBroker()
		stopDispatch() // inserts nothing once River is stopping
		<-dispatchDone
		<-copyDone
		err = errors.Join(err, <-brokerDone, ignoreClosed(httpServer.Shutdown(shutdownCtx)), stopRiver(shutdownCtx, riverClient, cfg.RunJobs))
		stopAux()
		db.close()
		s.done <- err
	}()
	logger.Info("serving", "url", s.URL)
	return s, nil
}

// Wait blocks until the server has shut down and returns why, nil after a
// clean shutdown.
func (s *server) Wait() error { return <-s.done }

func stopRiver(ctx context.Context, c *river.Client[pgx.Tx], started bool) error {
	if !started {
		return nil
	}
	if err := c.Stop(ctx); err != nil {
		return fmt.Errorf("stop river: %w", err)
	}
	return nil
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// readiness is /readyz's check: why this instance should not take traffic.
//
// /readyz answers anyone, so the reason is in words that name no host,
// port, user, database or SQL (a pgx error names them all: "failed to
// connect to `user=… database=…`: 10.0.0.5:5432 …"). What is behind it goes
// to the log when it changes (the kind of reason, or the error), not at
// every probe, and to inventory_readiness_failures_total.
type readiness struct {
	broker  *events.Broker
	pool    *pgxpool.Pool
	logger  *slog.Logger
	metrics *metrics.Metrics

	mu   sync.Mutex
	last string // the kind of the last answer's reason and its error; "" ready
}

func (r *readiness) check(ctx context.Context) (string, error) {
	reason, kind, err := r.why(ctx)
	if kind != "" {
		r.metrics.NotReady(kind)
	}
	// The first error after a database goes away is often not the one that
	// lasts (a terminated session, then refused connections): each new one
	// is logged once.
	last := kind
	if err != nil {
		last += ": " + err.Error()
	}
	r.mu.Lock()
	changed := last != r.last
	r.last = last
	r.mu.Unlock()
	switch {
	case changed && kind == "":
		r.logger.InfoContext(ctx, "ready")
	case changed && err != nil:
		r.logger.WarnContext(ctx, "not ready", "reason", reason, "err", err)
	case changed:
		r.logger.WarnContext(ctx, "not ready", "reason", reason)
	}
	return reason, nil
}

// why is the reason, its kind (a metric label) and the error behind it:
// the database does not answer, it is not migrated to what this binary
// expects, or live events do not flow (the broker logs its own errors).
// The database comes first: when it is down, that is what is wrong, not
// the events that cannot be read from it.
func (r *readiness) why(ctx context.Context) (reason, kind string, err error) {
	if err := r.pool.Ping(ctx); err != nil {
		return "database unreachable", "database", err
	}
	pending, err := migrations.Pending(ctx, r.pool)
	if err != nil {
		return "cannot read the database's schema version", "database", err
	}
	if pending != "" {
		return pending, "migrations", nil
	}
	if problem := r.broker.Problem(); problem != "" {
		return problem, "events", nil
	}
	return "", "", nil
}

// newStore returns a store on pool whose holds schedule their expiry jobs
// through River: every store the binary builds is one.
func newStore(pool *pgxpool.Pool) (*store.Store, error) {
	expiry, err := jobs.NewScheduler(pool)
	if err != nil {
		return nil, err
	}
	st := store.New(pool)
	st.Expiry = expiry
	return st, nil
}

// cliPoolConns is the size of a command's pool (INVENTORY_DB_MAX_CONNS is
// the server's): each command works through one connection at a time, and
// River's and goose's migrators through at most two.
const cliPoolConns = 4

// withPool runs fn with a command's pool on the direct connection.
func withPool(ctx context.Context, cfg config, fn func(*pgxpool.Pool) error) error {
	pool, err := openPool(ctx, cfg, cfg.direct(), "cli", cliPoolConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(pool)
}

// withPlainStore runs fn with a store on a CLI pool: one that cannot seal
// or open codes, for commands that touch none.
func withPlainStore(ctx context.Context, cfg config, fn func(*store.Store) error) error {
	return withPool(ctx, cfg, func(pool *pgxpool.Pool) error {
		st, err := newStore(pool)
		if err != nil {
			return err
		}
		return fn(st)
	})
}

// withStore runs fn with a store that can seal and open codes, after the
// same key check the server does at start-up.
func withStore(ctx context.Context, cfg config, fn func(*store.Store) error) error {
	keyring, err := cfg.keyring()
	if err != nil {
		return err
	}
	return withPlainStore(ctx, cfg, func(st *store.Store) error {
		st.Keyring = keyring
		if err := st.CodesKeyCheck(ctx); err != nil {
			return err
		}
		return fn(st)
	})
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
