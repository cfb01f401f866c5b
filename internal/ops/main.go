package ops

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/telemetry"
)

// Main runs a program and returns its exit code. `health` as the first argument runs
// [Health]; otherwise parse reads the configuration (usage on stderr) and run serves
// until SIGINT or SIGTERM. Exit codes: 0 after -h or a clean stop, 1 when run fails, 2
// for a bad configuration.
func Main[C any](service string, args []string, parse func([]string, io.Writer) (C, error), run func(context.Context, C) error) int {
	if len(args) > 0 && args[0] == "health" {
		return Health(args[1:], os.Stderr)
	}
	cfg, err := parse(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	log := NewLogger(os.Stderr, service, zerolog.InfoLevel)
	if err != nil {
		log.Error().Err(err).Msg("bad configuration")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Tracing, when the OTEL_* variables ask for it: set up before the part starts,
	// flushed after it stopped.
	stopTracing, err := telemetry.Setup(ctx, service)
	if err != nil {
		log.Error().Err(err).Msg("bad configuration")
		return 2
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			log.Warn().Err(err).Msg("flush traces")
		}
	}()
	if err := run(ctx, cfg); err != nil {
		log.Error().Err(err).Msg(service + " stopped")
		return 1
	}
	return 0
}
