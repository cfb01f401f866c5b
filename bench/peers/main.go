// Command peers runs the same agent loop on toolfleet, on DBOS Transact Go (two step
// layouts) and on Temporal's dev server, in interleaved rounds and under two durability
// settings, and prints one table of what a client sees: latency, runs per second, CPU
// per run, errors. README.md says what each figure is and every fairness choice.
//
//	go run . -quick     # a second or so per cell: checks that every system works
//	go run .            # the full benchmark (about 20 minutes on 2 cores)
//
// The same binary is each system's own worker process: started with a role as its
// first argument (dbos-app, dbos-tool, temporal-worker, temporal-tool), it serves that
// role until it is signalled.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// roles are the worker processes the benchmark starts from its own binary.
var roles = map[string]func(args []string) error{
	"dbos-app":        dbosApp,
	"dbos-tool":       dbosTool,
	"temporal-worker": temporalWorker,
	"temporal-tool":   temporalTool,
}

func main() {
	if len(os.Args) > 1 {
		if role, ok := roles[os.Args[1]]; ok {
			if err := role(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "peers %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runBenchmark(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// config is the benchmark's settings.
type config struct {
	Systems    []string      // toolfleet, dbos, dbos-queue, temporal
	Durability []string      // nofsync, fsync
	Rounds     int           // interleaved rounds; medians over them
	Cell       time.Duration // how long each cell starts runs
	Warmup     time.Duration // runs before each cell, not counted
	InFlight   int           // runs in flight in the loaded cell
	Steps      int           // tool steps of the long run
	Repo       string        // the toolfleet repository, built from source
	Cache      string        // where built binaries and the PostgreSQL template go
	Temporal   string        // the temporal CLI
	PGBin      string        // PostgreSQL's bin directory
	PGUser     string        // the user PostgreSQL runs as when the benchmark runs as root
	DBOSPoll   time.Duration // DBOS queue and result polling (its default is 1s)
	TemporalDC []string      // dynamic config values for Temporal's dev server, KEY=VALUE
	Seed       int64         // the rounds' shuffles
	Keep       bool          // keep the work directory (logs, data) for a look afterwards
}

// defaultTemporalConfig lifts the dev server's cap on how often its one history
// shard reads its transfer queue (20 a second by default; a production server spreads
// a namespace over hundreds of shards): under the cap, every workflow and activity
// task waits about 45ms for its turn once a few runs follow one another.
var defaultTemporalConfig = []string{"history.transferProcessorMaxPollRPS=10000"}

var allSystems = []string{"toolfleet", "dbos", "dbos-queue", "temporal"}
var allDurability = []string{"nofsync", "fsync"}

func parseFlags(args []string, out io.Writer) (config, error) {
	cacheDir, err := os.UserCacheDir()
	if err != nil {
		cacheDir = os.TempDir()
	}
	cacheDir = filepath.Join(cacheDir, "toolfleet-peers")
	var c config
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(out)
	quick := fs.Bool("quick", false, "a check that everything works: one round, 1s cells, 0.3s warm-ups")
	systems := fs.String("systems", strings.Join(allSystems, ","), "systems to run, comma-separated")
	durability := fs.String("durability", strings.Join(allDurability, ","), "durability settings: nofsync (no fsync at commit), fsync (fsync per commit or write)")
	fs.IntVar(&c.Rounds, "rounds", 3, "interleaved rounds (each in a new random order); the table shows medians")
	fs.DurationVar(&c.Cell, "cell", 10*time.Second, "how long each cell starts new runs")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "runs before each cell that are not counted")
	fs.IntVar(&c.InFlight, "inflight", 64, "runs in flight in the loaded cell")
	fs.IntVar(&c.Steps, "steps", 5, "tool steps of the long run")
	fs.StringVar(&c.Repo, "repo", "../..", "the toolfleet repository (its planner, executor and nats-server are built from it)")
	fs.StringVar(&c.Cache, "cache", cacheDir, "where built binaries and the PostgreSQL template are kept")
	fs.StringVar(&c.Temporal, "temporal", filepath.Join(cacheDir, "bin", "temporal"), "the temporal CLI (go install github.com/temporalio/cli/cmd/temporal@v1.5.1)")
	fs.StringVar(&c.PGBin, "pg-bin", "/usr/lib/postgresql/15/bin", "PostgreSQL's bin directory (initdb, postgres)")
	fs.StringVar(&c.PGUser, "pg-user", "postgres", "the user PostgreSQL runs as when the benchmark runs as root")
	fs.DurationVar(&c.DBOSPoll, "dbos-poll", 10*time.Millisecond, "DBOS's queue polling and result polling interval (its default, 1s, would add about a second to every queued step)")
	fs.Func("temporal-config", "a dynamic config value for Temporal's dev server, KEY=JSON (repeatable); given, it replaces the default, "+strings.Join(defaultTemporalConfig, " "), func(v string) error {
		if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		c.TemporalDC = append(c.TemporalDC, v)
		return nil
	})
	fs.Int64Var(&c.Seed, "seed", time.Now().UnixNano(), "seed of the rounds' random order")
	fs.BoolVar(&c.Keep, "keep", false, "keep the work directory (each process's log, the data) and print where it is")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rounds"] {
			c.Rounds = 1
		}
		if !set["cell"] {
			c.Cell = time.Second
		}
		if !set["warmup"] {
			c.Warmup = 300 * time.Millisecond
		}
	}
	if c.TemporalDC == nil {
		c.TemporalDC = defaultTemporalConfig
	}
	if c.Systems, err = pick("-systems", *systems, allSystems); err != nil {
		return config{}, err
	}
	if c.Durability, err = pick("-durability", *durability, allDurability); err != nil {
		return config{}, err
	}
	switch {
	case c.Rounds < 1:
		return config{}, fmt.Errorf("-rounds must be at least 1, got %d", c.Rounds)
	case c.Cell <= 0 || c.Warmup < 0:
		return config{}, fmt.Errorf("-cell must be positive and -warmup not negative, got %s and %s", c.Cell, c.Warmup)
	case c.InFlight < 1 || c.Steps < 1:
		return config{}, fmt.Errorf("-inflight and -steps must be at least 1, got %d and %d", c.InFlight, c.Steps)
	case c.DBOSPoll <= 0:
		return config{}, fmt.Errorf("-dbos-poll must be positive, got %s", c.DBOSPoll)
	}
	if c.Repo, err = filepath.Abs(c.Repo); err != nil {
		return config{}, err
	}
	return c, nil
}

// pick parses a comma-separated subset of known, keeping known's order.
func pick(flagName, list string, known []string) ([]string, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(known, s) {
			return nil, fmt.Errorf("%s: unknown %q (known: %s)", flagName, s, strings.Join(known, ", "))
		}
		want[s] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: none given", flagName)
	}
	return out, nil
}
