// Command picker runs the toolfleet picker: a NATS micro service (toolfleet-picker,
// endpoint pick) that ranks the live tool catalog against requests. `picker eval`
// instead prints the default scorer's quality on the toolret benchmarks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

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
	cfg := picker.Config{}
	flag.StringVar(&cfg.NATSURL, "nats", env("TOOLFLEET_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL (env TOOLFLEET_NATS_URL)")
	flag.StringVar(&cfg.CredsFile, "creds", os.Getenv("TOOLFLEET_NATS_CREDS"), "NATS credentials file (env TOOLFLEET_NATS_CREDS)")
	flag.StringVar(&cfg.TLSCert, "tls-cert", os.Getenv("TOOLFLEET_NATS_TLS_CERT"), "client certificate (env TOOLFLEET_NATS_TLS_CERT)")
	flag.StringVar(&cfg.TLSKey, "tls-key", os.Getenv("TOOLFLEET_NATS_TLS_KEY"), "client key (env TOOLFLEET_NATS_TLS_KEY)")
	flag.StringVar(&cfg.TLSCA, "tls-ca", os.Getenv("TOOLFLEET_NATS_TLS_CA"), "CA to trust (env TOOLFLEET_NATS_TLS_CA)")
	flag.StringVar(&cfg.HTTPAddr, "http", env("TOOLFLEET_PICKER_HTTP", ":9090"), "address of /metrics and /healthz; empty to disable (env TOOLFLEET_PICKER_HTTP)")
	flag.StringVar(&cfg.EmbeddingsURL, "embeddings-url", os.Getenv("TOOLFLEET_EMBEDDINGS_URL"), "OpenAI-compatible server for the embedding and hybrid scorers (env TOOLFLEET_EMBEDDINGS_URL)")
	flag.StringVar(&cfg.EmbeddingsModel, "embeddings-model", env("TOOLFLEET_EMBEDDINGS_MODEL", "text-embedding-3-small"), "embedding model (env TOOLFLEET_EMBEDDINGS_MODEL)")
	flag.DurationVar(&cfg.Timeout, "timeout", 2*time.Second, "scoring bound for requests without their own timeout")
	level := flag.String("log-level", env("TOOLFLEET_LOG_LEVEL", "info"), "log level (env TOOLFLEET_LOG_LEVEL)")
	flag.Parse()
	cfg.EmbeddingsAPIKey = os.Getenv("TOOLFLEET_EMBEDDINGS_API_KEY")

	lvl, err := zerolog.ParseLevel(*level)
	if err != nil {
		fmt.Fprintln(os.Stderr, "picker:", err)
		os.Exit(2)
	}
	cfg.Log = zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Str("service", picker.ServiceName).Logger()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := picker.Run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		cfg.Log.Error().Err(err).Msg("picker stopped")
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

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
