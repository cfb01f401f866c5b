// Command picker runs the toolfleet picker: a NATS micro service (toolfleet-picker,
// endpoint pick) that ranks the live tool catalog against requests. Configuration comes
// from flags and TOOLFLEET_* environment variables; run with -h for the list.
//
// `picker eval [-data dir]` instead prints the default scorer's quality on the toolret
// retrieval benchmarks beside their plain-BM25 baseline.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/picker"
	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/internal/toolret"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "eval" {
		if err := eval(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "picker eval:", err)
			os.Exit(1)
		}
		return
	}
	log := zerolog.New(os.Stderr).With().Timestamp().Str("service", picker.ServiceName).Logger()
	if lvl, err := zerolog.ParseLevel(os.Getenv("TOOLFLEET_LOG_LEVEL")); err == nil && lvl != zerolog.NoLevel {
		log = log.Level(lvl) // env TOOLFLEET_LOG_LEVEL: debug, info (default: all), warn, error
	}
	cfg, err := picker.Flags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Log = log
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := picker.Run(ctx, cfg); err != nil {
		log.Error().Err(err).Msg("picker stopped")
		os.Exit(1)
	}
}

func eval(args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	dir := fs.String("data", shareddata.Dir("toolret"), "the toolret directory (default ../shared/testdata/toolret)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("toolret data not found; pass -data or set TOOLFLEET_SHARED")
	}
	_, err := toolret.Report(context.Background(), os.Stdout, *dir)
	return err
}
