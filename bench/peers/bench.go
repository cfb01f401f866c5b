package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// setup is one system under one durability setting: a row of the table.
type setup struct {
	system string // toolfleet, dbos, dbos-queue, temporal
	fsync  bool   // fsync per commit or write, rather than none at commit
}

func (s setup) durability() string {
	if s.fsync {
		return "fsync"
	}
	return "nofsync"
}

func (s setup) String() string { return s.system + "/" + s.durability() }

// instance is a started system: its processes (all of them count for CPU) and a
// client.
type instance struct {
	procs  []*proc
	runner runner
	// check, when set, is asked after the turn whether the settings took effect.
	check func() error
	// stop ends the processes, in the order that lets each stop cleanly.
	stop func()
}

// turnResult is one turn of a setup: its three cells.
type turnResult struct {
	one    cellResult // one tool step, one run in flight
	long   cellResult // cfg.Steps tool steps, one run in flight
	loaded cellResult // one tool step, cfg.InFlight runs in flight
}

// bench is the state of one benchmark: its settings, its work directory and its log.
type bench struct {
	cfg  config
	work string
	log  io.Writer
	bin  string // this program, started for each worker role
}

func runBenchmark(ctx context.Context, cfg config, out, log io.Writer) error {
	work, err := os.MkdirTemp("", "toolfleet-peers-")
	if err != nil {
		return err
	}
	if cfg.Keep {
		fmt.Fprintf(log, "work directory (kept): %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, work: work, log: log, bin: bin}
	if err := b.prepare(ctx); err != nil {
		return err
	}
	var setups []setup
	for _, sys := range cfg.Systems {
		for _, d := range cfg.Durability {
			setups = append(setups, setup{system: sys, fsync: d == "fsync"})
		}
	}
	host, _ := os.Hostname()
	fmt.Fprintf(log, "peers: %d rounds of %d setups, cells of %s after %s of warm-up, seed %d, on %s (%d CPUs), load %s\n",
		cfg.Rounds, len(setups), cfg.Cell, cfg.Warmup, cfg.Seed, host, runtime.NumCPU(), loadAverage())
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0))
	results := map[setup][]turnResult{}
	for round := 1; round <= cfg.Rounds; round++ {
		order := slices.Clone(setups)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, s := range order {
			t0 := time.Now()
			tr, err := b.turn(ctx, s, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, s, err)
			}
			results[s] = append(results[s], tr)
			fmt.Fprintf(log, "round %d %-19s 1 in flight p50 %s, %.0f runs/s | %d in flight %.0f runs/s, p99 %s, CPU/run %s | %d steps p50 %s | errors %d, retries %d (%s; load %s)\n",
				round, s, ms(tr.one.quantile(0.5)), tr.one.rate(), cfg.InFlight, tr.loaded.rate(), ms(tr.loaded.quantile(0.99)),
				ms(tr.loaded.cpuPerRun()), cfg.Steps, ms(tr.long.quantile(0.5)), errorsOf(tr), retriesOf(tr),
				time.Since(t0).Round(time.Second), loadAverage())
		}
	}
	printTable(out, cfg, setups, results)
	return nil
}

// prepare builds or checks what the chosen systems need, once.
func (b *bench) prepare(ctx context.Context) error {
	if slices.Contains(b.cfg.Systems, "toolfleet") {
		if err := b.buildToolfleet(ctx); err != nil {
			return err
		}
	}
	if slices.Contains(b.cfg.Systems, "dbos") || slices.Contains(b.cfg.Systems, "dbos-queue") {
		if err := b.pgTemplate(ctx); err != nil {
			return err
		}
	}
	if slices.Contains(b.cfg.Systems, "temporal") {
		if _, err := os.Stat(b.cfg.Temporal); err != nil {
			return fmt.Errorf("the temporal CLI: %w (build it: GOBIN=%s go install github.com/temporalio/cli/cmd/temporal@v1.5.1, or give -temporal)",
				err, filepath.Dir(b.cfg.Temporal))
		}
	}
	return nil
}

// turn starts s afresh, measures its three cells and stops it.
func (b *bench) turn(ctx context.Context, s setup, round int) (turnResult, error) {
	dir := filepath.Join(b.work, fmt.Sprintf("r%d-%s-%s", round, s.system, s.durability()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return turnResult{}, err
	}
	var inst *instance
	var err error
	switch s.system {
	case "toolfleet":
		inst, err = b.startToolfleet(ctx, dir, s.fsync)
	case "dbos", "dbos-queue":
		inst, err = b.startDBOS(ctx, dir, s.fsync, s.system == "dbos-queue")
	case "temporal":
		inst, err = b.startTemporal(ctx, dir, s.fsync)
	default:
		err = fmt.Errorf("unknown system %q", s.system)
	}
	if err != nil {
		return turnResult{}, err
	}
	defer func() {
		if err := inst.runner.Close(); err != nil {
			fmt.Fprintf(b.log, "%s: closing the client: %v\n", s, err)
		}
		inst.stop()
	}()
	// Ready when a run of each length completes: every process is up and connected.
	for _, steps := range []int{1, b.cfg.Steps} {
		err := waitFor(ctx, s.String()+" answering a run", 2*time.Minute, inst.procs, func(ctx context.Context) error {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return inst.runner.Run(rctx, steps)
		})
		if err != nil {
			return turnResult{}, err
		}
	}
	var tr turnResult
	// The loaded cell goes last, so that what it leaves behind (a backlog of
	// clean-up) falls on no other cell.
	cells := []struct {
		res             *cellResult
		steps, inFlight int
	}{{&tr.one, 1, 1}, {&tr.long, b.cfg.Steps, 1}, {&tr.loaded, 1, b.cfg.InFlight}}
	for _, c := range cells {
		if *c.res, err = measure(ctx, inst.runner, inst.procs, c.steps, c.inFlight, b.cfg.Warmup, b.cfg.Cell); err != nil {
			return turnResult{}, err
		}
	}
	for _, p := range inst.procs {
		if err := p.exited(); err != nil {
			return turnResult{}, err
		}
	}
	if inst.check != nil {
		if err := inst.check(); err != nil {
			return turnResult{}, fmt.Errorf("settings: %w", err)
		}
	}
	return tr, nil
}

func errorsOf(tr turnResult) int { return tr.one.Errors + tr.long.Errors + tr.loaded.Errors }

func retriesOf(tr turnResult) int64 { return tr.one.Retries + tr.long.Retries + tr.loaded.Retries }

// printTable writes the medians over rounds of each setup as a Markdown table, and the
// first error of each setup that had any.
func printTable(w io.Writer, cfg config, setups []setup, results map[setup][]turnResult) {
	fmt.Fprintf(w, "| system | durability | 1 in flight: p50 | runs/s | %d in flight: runs/s | p99 | CPU per run | %d-tool-step run p50 | errors | retries |\n", cfg.InFlight, cfg.Steps)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	var notes []string
	for _, s := range setups {
		trs := results[s]
		med := func(f func(turnResult) float64) float64 {
			v := make([]float64, len(trs))
			for i, tr := range trs {
				v[i] = f(tr)
			}
			return median(v)
		}
		errs, retries := 0, int64(0)
		for i, tr := range trs {
			errs += errorsOf(tr)
			retries += retriesOf(tr)
			for _, c := range []cellResult{tr.one, tr.long, tr.loaded} {
				if c.FirstErr != nil {
					notes = append(notes, fmt.Sprintf("%s, round %d: %v", s, i+1, c.FirstErr))
					break
				}
			}
		}
		msOf := func(f func(turnResult) time.Duration) func(turnResult) float64 {
			return func(tr turnResult) float64 { return float64(f(tr)) / float64(time.Millisecond) }
		}
		fmt.Fprintf(w, "| %s | %s | %s ms | %.0f | %.0f | %s ms | %s ms | %s ms | %d | %d |\n",
			systemLabel(s.system), durabilityLabel(s),
			fmtMS(med(msOf(func(tr turnResult) time.Duration { return tr.one.quantile(0.5) }))),
			med(func(tr turnResult) float64 { return tr.one.rate() }),
			med(func(tr turnResult) float64 { return tr.loaded.rate() }),
			fmtMS(med(msOf(func(tr turnResult) time.Duration { return tr.loaded.quantile(0.99) }))),
			fmtMS(med(msOf(func(tr turnResult) time.Duration { return tr.loaded.cpuPerRun() }))),
			fmtMS(med(msOf(func(tr turnResult) time.Duration { return tr.long.quantile(0.5) }))),
			errs, retries)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nFirst error of each turn that had errors:")
		for _, n := range notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

func systemLabel(system string) string {
	switch system {
	case "toolfleet":
		return "toolfleet (nats-server, planner, executor)"
	case "dbos":
		return "DBOS, model and tool as steps in one process"
	case "dbos-queue":
		return "DBOS, tool as a child workflow on a queue, second process"
	case "temporal":
		return "Temporal dev server (SQLite), activities, tool on its own worker"
	}
	return system
}

func durabilityLabel(s setup) string {
	if !s.fsync {
		return "no fsync at commit"
	}
	return "fsync per commit"
}

// median is the middle value of v (the mean of the middle two for an even count).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// fmtMS writes milliseconds with three significant digits.
func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func ms(d time.Duration) string { return fmtMS(float64(d)/float64(time.Millisecond)) + "ms" }

// loadAverage is the 1-minute load average, as uptime shows it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}
