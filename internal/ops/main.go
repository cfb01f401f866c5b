package ops

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/telemetry"
)

// Main runs a program and returns its exit code. `health` as the first argument runs
// [Health], `version` prints [Build]'s line on stdout, `help` (like -h and --help)
// prints the usage; otherwise parse reads the configuration (usage on stderr) and run
// serves until SIGINT or SIGTERM. Exit codes: 0 after help, version or a clean stop, 1
// when run fails, 2 for a bad configuration ([ExitConfig]: parse's errors, and run's
// that match [ErrConfig]).
func Main[C any](service string, args []string, parse func([]string, io.Writer) (C, error), run func(context.Context, C) error) int {
	return MainContext(context.Background(), service, args, os.Stdout, os.Stderr, parse, run)
}

// MainContext is [Main] writing to stdout and stderr, and stopping when ctx ends too:
// for tests, and for a program whose command line has more than one shape.
func MainContext[C any](ctx context.Context, service string, args []string, stdout, stderr io.Writer, parse func([]string, io.Writer) (C, error), run func(context.Context, C) error) int {
	if len(args) > 0 {
		switch args[0] {
		case "health":
			return Health(args[1:], stderr)
		case "version":
			fmt.Fprintln(stdout, Build(service))
			return ExitOK
		case "help":
			args = []string{"-h"}
		}
	}
	return Serve(ctx, service, stderr, func() (C, error) { return parse(args, stderr) }, run)
}

// Serve is [MainContext] once the command line is parsed, for a program whose flags
// another parser read (toolfleet's, on cobra): configure builds the configuration from
// them and the environment, and run serves until ctx ends, SIGINT or SIGTERM. It logs
// the errors on stderr and returns the exit code, as [Main] does.
func Serve[C any](ctx context.Context, service string, stderr io.Writer, configure func() (C, error), run func(context.Context, C) error) int {
	cfg, err := configure()
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	log := NewLogger(stderr, service, zerolog.InfoLevel)
	if err == nil {
		// A tracing variable that asks for something unknown is a bad configuration
		// too; each program sets its tracing up and hands the provider to its parts.
		err = telemetry.CheckEnv()
	}
	if err != nil {
		log.Error().Err(err).Msg("bad configuration")
		return ExitConfig
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		if errors.Is(err, ErrConfig) {
			log.Error().Err(err).Msg("bad configuration")
			return ExitConfig
		}
		log.Error().Err(err).Msg(service + " stopped")
		return ExitFailure
	}
	return ExitOK
}
