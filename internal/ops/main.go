package ops

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

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
	if err == nil {
		// A tracing variable that asks for something unknown is a bad configuration
		// too; each program sets its tracing up and hands the provider to its parts.
		err = telemetry.CheckEnv()
	}
	if err != nil {
		log.Error().Err(err).Msg("bad configuration")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		log.Error().Err(err).Msg(service + " stopped")
		return 1
	}
	return 0
}
