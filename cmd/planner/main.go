// Command planner serves toolfleet's planner: the tool loop over the fleet and its HTTP
// API. Configuration comes from flags and TOOLFLEET_* environment variables; run with
// -h for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
)

func main() {
	log := zerolog.New(os.Stderr).With().Timestamp().Str("service", "planner").Logger()
	if lvl, err := zerolog.ParseLevel(os.Getenv("TOOLFLEET_LOG_LEVEL")); err == nil && lvl != zerolog.NoLevel {
		log = log.Level(lvl) // env TOOLFLEET_LOG_LEVEL: debug, info (default: all), warn, error
	}
	cfg, err := planner.Flags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2)
	}
	cfg.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := planner.Serve(ctx, cfg); err != nil {
		log.Error().Err(err).Msg("planner stopped")
		os.Exit(1)
	}
}
