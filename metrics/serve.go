package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds the switch's series read from src, the process's
// (process_*: CPU, memory, file descriptors) and the Go build's
// (go_build_info).
func Registry(src Source, build Build) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		&collector{src: src, build: build},
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	return reg
}

// Handler serves src's metrics. A counter with no series (a bug: the
// tests look for them) is logged; the scrape still gets every other one.
func Handler(src Source, build Build) http.Handler {
	return promhttp.HandlerFor(Registry(src, build), promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(slog.Default().Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// Serve serves GET /metrics on l until ctx ends. The caller listens, so
// that an address it cannot have is an error before the switch starts.
func Serve(ctx context.Context, l net.Listener, src Source, build Build) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(src, build))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
