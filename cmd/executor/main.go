// Command executor serves toolfleet tool calls: the built-in tools and the tools of a
// tools file, from their durable consumers on JetStream. Configuration comes from flags
// and TOOLFLEET_* environment variables; run with -h for the list. SIGTERM or SIGINT
// stops it gracefully: no new calls, in-flight calls finish or are handed back.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/executorcmd"
)

func main() {
	cfg, err := executorcmd.Parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	log := zerolog.New(os.Stderr).With().Timestamp().Str("service", "executor").Logger()
	if err != nil {
		log.Error().Err(err).Msg("bad configuration")
		os.Exit(2)
	}
	log = log.Level(cfg.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := executorcmd.Serve(ctx, cfg, log); err != nil {
		log.Error().Err(err).Msg("executor stopped")
		os.Exit(1)
	}
}
