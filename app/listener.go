package app

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"inventory/api"
	"inventory/config"
)

// listener is the public HTTP server before and after the application is
// built: it may listen early (to answer /healthz and /readyz while waiting
// for migrations), and its gate answers 503 until the router is ready.
type listener struct {
	cfg      config.Config
	server   *http.Server
	gate     *startGate
	ln       net.Listener
	serveErr chan error
	// aux carries what runs beside the API (River UI's background work,
	// the replica monitor, the private metrics and profiler listeners): it
	// ends after HTTP drained, or at once if starting fails.
	aux     context.Context
	stopAux context.CancelFunc
}

func newListener(ctx context.Context, cfg config.Config) *listener {
	l := &listener{cfg: cfg, gate: &startGate{}, serveErr: make(chan error, 1)}
	l.aux, l.stopAux = context.WithCancel(context.WithoutCancel(ctx))
	// Requests must not inherit the signal's cancellation: Shutdown lets
	// the in-flight ones finish.
	baseCtx := context.WithoutCancel(ctx)
	l.server = &http.Server{Handler: l.gate, ReadHeaderTimeout: cfg.HTTPHeaderTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
		BaseContext: func(net.Listener) context.Context { return baseCtx }}
	return l
}

// listen starts serving on cfg.ListenAddr, once; a second call does nothing.
func (l *listener) listen() error {
	if l.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", l.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", l.cfg.ListenAddr, err)
	}
	l.ln = api.NewConnLimit(ln, l.cfg.MaxConnsPerIP, l.cfg.TrustedProxies)
	go func() { l.serveErr <- l.server.Serve(l.ln) }()
	return nil
}

// abort undoes a start that failed: nothing is served any more.
func (l *listener) abort() {
	if l.ln != nil {
		_ = l.server.Close()
	}
	l.stopAux()
}
