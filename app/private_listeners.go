package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePrivate serves h on a listener of its own at addr until ctx ends:
// for what should not be on the API's port without a key (metrics for a
// scraper, the profiler). addr should be loopback or otherwise private.
func servePrivate(ctx context.Context, name, addr string, h http.Handler, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() { _ = srv.Serve(ln) }()
	logger.Info("serving "+name, "addr", ln.Addr().String())
	return nil
}

// pprofHandler is Go's profiler (INVENTORY_PPROF_ADDR), so `go tool pprof`
// can show where a running server spends its CPU.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	return mux
}
