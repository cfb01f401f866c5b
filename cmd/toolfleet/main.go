// Command toolfleet runs the whole fleet in one process, on an embedded JetStream:
//
//	toolfleet demo [-calls N] [-data DIR]   an agent run and a load, then a summary
//	toolfleet dev  [-http ADDR] [-nats-port N] [-data DIR]   the fleet and its HTTP API until Ctrl-C
//
// Both take -http-allow HOSTS (the hosts http_get may reach; none by default) and -v
// (the parts' warnings on stderr). dev protects its API with TOOLFLEET_API_TOKEN when set.
//
// With TOOLFLEET_MODEL set (e.g. ollama/llama3.1, or openai/gpt-4o-mini with
// OPENAI_API_KEY), runs use that model; otherwise an offline scripted model.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/allinone"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || (args[0] != "demo" && args[0] != "dev") {
		fmt.Fprintln(os.Stderr, "usage: toolfleet demo [-calls N] [-data DIR] | toolfleet dev [-http ADDR] [-nats-port N] [-data DIR]")
		return 2
	}
	fs := flag.NewFlagSet("toolfleet "+args[0], flag.ContinueOnError)
	data := fs.String("data", "", "directory for JetStream's files (default: a temporary one, removed at exit)")
	calls := fs.Int("calls", 3000, "demo: tool calls in the load")
	httpAddr := fs.String("http", "127.0.0.1:8080", "dev: the planner API's listen address")
	natsPort := fs.Int("nats-port", 4222, "dev: the embedded NATS server's port on 127.0.0.1")
	httpAllow := fs.String("http-allow", "", "comma-separated hosts http_get may reach (default: none, and no http_get)")
	verbose := fs.Bool("v", false, "log the parts' warnings and errors to stderr")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := zerolog.Nop()
	if *verbose {
		log = zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fleet := allinone.Options{DataDir: *data, Log: log}
	if *httpAllow != "" {
		fleet.HTTPAllowlist = strings.Split(*httpAllow, ",")
	}
	var err error
	switch args[0] {
	case "demo":
		st, _ := os.Stderr.Stat()
		err = allinone.Demo(ctx, allinone.DemoOptions{Fleet: fleet, Calls: *calls, Out: os.Stdout,
			Progress: os.Stderr, ProgressTTY: st != nil && st.Mode()&os.ModeCharDevice != 0})
	case "dev":
		fleet.NATSPort = *natsPort
		err = allinone.Dev(ctx, allinone.DevOptions{Fleet: fleet, HTTPAddr: *httpAddr,
			Token: os.Getenv("TOOLFLEET_API_TOKEN"), Out: os.Stdout})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolfleet:", err)
		return 1
	}
	return 0
}
