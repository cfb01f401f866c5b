package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Task queues: the workflow and the model's activity on one worker, the tool's
// activity on another.
const (
	agentTaskQueue = "agent"
	toolTaskQueue  = "tool"
)

// startTemporal starts the Temporal CLI's dev server (SQLite in a file, WAL; see the
// README for what synchronous means there), a worker for the workflow and the model's
// activity, and a worker for the tool's activity.
func (b *bench) startTemporal(ctx context.Context, dir string, fsync bool) (*instance, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	// In WAL mode, synchronous=NORMAL syncs the WAL only at checkpoints (no fsync at
	// commit); FULL syncs it at every commit.
	sync := "NORMAL"
	if fsync {
		sync = "FULL"
	}
	db := filepath.Join(dir, "temporal.db")
	inst := &instance{}
	inst.stop = func() {
		for i := len(inst.procs) - 1; i >= 0; i-- {
			inst.procs[i].stop(syscall.SIGTERM, 10*time.Second)
		}
	}
	fail := func(err error) (*instance, error) { inst.stop(); return nil, err }
	argv := []string{b.cfg.Temporal, "server", "start-dev", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(ports[0]), "--http-port", strconv.Itoa(ports[1]), "--metrics-port", strconv.Itoa(ports[2]),
		"--headless", "--db-filename", db, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=" + sync,
		"--log-level", "warn"}
	for _, kv := range b.cfg.TemporalDC {
		argv = append(argv, "--dynamic-config-value", kv)
	}
	srv, err := startProc("temporal", dir, cleanEnv(), argv...)
	if err != nil {
		return fail(err)
	}
	inst.procs = append(inst.procs, srv)
	var c client.Client
	err = waitFor(ctx, "the temporal dev server", 2*time.Minute, inst.procs, func(ctx context.Context) error {
		var err error
		c, err = client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietLogger(io.Discard)})
		return err
	})
	if err != nil {
		return fail(err)
	}
	for _, role := range []string{"temporal-worker", "temporal-tool"} {
		p, err := startProc(role, dir, cleanEnv(), b.bin, role, "-addr", addr)
		if err != nil {
			c.Close()
			return fail(err)
		}
		inst.procs = append(inst.procs, p)
	}
	inst.runner = &temporalRunner{c: c}
	inst.check = func() error {
		if _, err := os.Stat(db + "-wal"); err != nil {
			return fmt.Errorf("temporal's SQLite is not in WAL mode: %w", err)
		}
		return nil
	}
	return inst, nil
}

// temporalRunner starts the workflow with the SDK's client and awaits its result.
type temporalRunner struct {
	c client.Client
	n atomic.Int64
}

func (r *temporalRunner) Run(ctx context.Context, steps int) error {
	id := fmt.Sprintf("run-%d-%d", os.Getpid(), r.n.Add(1))
	run, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: agentTaskQueue}, "agent", steps)
	if err != nil {
		return err
	}
	var answer string
	if err := run.Get(ctx, &answer); err != nil {
		return err
	}
	if answer != "done" {
		return fmt.Errorf("workflow %s answered %q, want \"done\"", id, answer)
	}
	return nil
}

func (r *temporalRunner) Retries() int64 { return 0 }

func (r *temporalRunner) Close() error {
	r.c.Close()
	return nil
}

// agentTemporal is the agent loop as a Temporal workflow: each model turn is an
// activity on the workflow's worker, each tool call an activity on the tool's.
func agentTemporal(ctx workflow.Context, steps int) (string, error) {
	model := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	tool := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: toolTaskQueue, StartToCloseTimeout: 30 * time.Second})
	for i := range steps {
		var call modelReply
		if err := workflow.ExecuteActivity(model, "model", i, steps).Get(ctx, &call); err != nil {
			return "", err
		}
		var out string
		if err := workflow.ExecuteActivity(tool, "echo", call.Arguments).Get(ctx, &out); err != nil {
			return "", err
		}
		if out != call.Arguments {
			return "", fmt.Errorf("echo answered %q to %q", out, call.Arguments)
		}
	}
	var final modelReply
	err := workflow.ExecuteActivity(model, "model", steps, steps).Get(ctx, &final)
	return final.Text, err
}

func modelActivity(_ context.Context, i, steps int) (modelReply, error) {
	return modelTurn(i, steps), nil
}

func echoActivity(_ context.Context, args string) (string, error) { return echo(args), nil }

// temporalWorker serves the workflow and the model's activity.
func temporalWorker(args []string) error {
	return serveTemporal("temporal-worker", args, agentTaskQueue, func(w worker.Worker) {
		w.RegisterWorkflowWithOptions(agentTemporal, workflow.RegisterOptions{Name: "agent"})
		w.RegisterActivityWithOptions(modelActivity, activity.RegisterOptions{Name: "model"})
	})
}

// temporalTool serves the tool's activity.
func temporalTool(args []string) error {
	return serveTemporal("temporal-tool", args, toolTaskQueue, func(w worker.Worker) {
		w.RegisterActivityWithOptions(echoActivity, activity.RegisterOptions{Name: "echo"})
	})
}

// serveTemporal runs a worker of taskQueue, with the SDK's default options, until
// it is signalled.
func serveTemporal(name string, args []string, taskQueue string, register func(worker.Worker)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7233", "the Temporal frontend")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c, err := client.DialContext(ctx, client.Options{HostPort: *addr, Logger: quietLogger(os.Stderr)})
	if err != nil {
		return err
	}
	defer c.Close()
	w := worker.New(c, taskQueue, worker.Options{})
	register(w)
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}

// quietLogger is the SDK's logger writing warnings and errors only.
func quietLogger(w io.Writer) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})))
}
