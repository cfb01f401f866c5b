package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
)

// asPGUser is argv run as the PostgreSQL user when this program runs as root (initdb
// and postgres refuse to run as root), or as it is otherwise.
func (b *bench) asPGUser(argv ...string) []string {
	if os.Geteuid() != 0 {
		return argv
	}
	return append([]string{"runuser", "-u", b.cfg.PGUser, "--"}, argv...)
}

// pgTemplate makes a PostgreSQL cluster once, which each turn copies: every turn
// starts from an empty cluster, as the other systems start from empty storage.
func (b *bench) pgTemplate(ctx context.Context) error {
	if err := os.Chmod(b.work, 0o755); err != nil { // the PostgreSQL user reaches its copies
		return err
	}
	dir := filepath.Join(b.work, "pg-template")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := b.chownPG(dir); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "initdb (%s)\n", b.cfg.PGBin)
	argv := b.asPGUser(filepath.Join(b.cfg.PGBin, "initdb"), "-D", dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// chownPG gives dir to the PostgreSQL user when running as root.
func (b *bench) chownPG(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(b.cfg.PGUser)
	if err != nil {
		return fmt.Errorf("-pg-user: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// startPG starts a copy of the template cluster in dir/pg on a free port.
// synchronous_commit=off acknowledges a commit before its WAL is flushed (no fsync at
// commit); on (with fsync=on, the default) flushes it first.
func (b *bench) startPG(ctx context.Context, dir string, fsync bool) (*proc, string, error) {
	data := filepath.Join(dir, "pg")
	cp := exec.CommandContext(ctx, "cp", "-a", filepath.Join(b.work, "pg-template"), data)
	if out, err := cp.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("copy the PostgreSQL template: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	syncCommit := "off"
	if fsync {
		syncCommit = "on"
	}
	argv := b.asPGUser(filepath.Join(b.cfg.PGBin, "postgres"), "-D", data, "-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port), "-c", "unix_socket_directories="+data,
		"-c", "fsync=on", "-c", "synchronous_commit="+syncCommit)
	pg, err := startProc("postgres", dir, cleanEnv(), argv...)
	if err != nil {
		return nil, "", err
	}
	isReady := func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, filepath.Join(b.cfg.PGBin, "pg_isready"), "-q", "-U", "postgres", "-h", "127.0.0.1", "-p", strconv.Itoa(port))
		return cmd.Run()
	}
	if err := waitFor(ctx, "postgres", time.Minute, []*proc{pg}, isReady); err != nil {
		pg.stop(syscall.SIGINT, 20*time.Second)
		return nil, "", err
	}
	return pg, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/peers?sslmode=disable", port), nil
}

// startDBOS starts PostgreSQL and the DBOS application (an HTTP endpoint that runs
// the agent workflow and answers with its result), and for the queue layout the
// process that serves the tool's queue.
func (b *bench) startDBOS(ctx context.Context, dir string, fsync, queue bool) (*instance, error) {
	inst := &instance{}
	var pg *proc
	inst.stop = func() {
		for _, p := range inst.procs {
			if p != pg {
				p.stop(syscall.SIGTERM, 10*time.Second)
			}
		}
		if pg != nil {
			pg.stop(syscall.SIGINT, 20*time.Second) // fast shutdown
		}
	}
	fail := func(err error) (*instance, error) { inst.stop(); return nil, err }
	pg, dbURL, err := b.startPG(ctx, dir, fsync)
	if err != nil {
		return nil, err
	}
	inst.procs = append(inst.procs, pg)
	httpPort, err := freePort()
	if err != nil {
		return fail(err)
	}
	poll := b.cfg.DBOSPoll.String()
	app, err := startProc("dbos-app", dir, cleanEnv(), b.bin, "dbos-app", "-db", dbURL,
		"-http", fmt.Sprintf("127.0.0.1:%d", httpPort), "-queue="+strconv.FormatBool(queue), "-poll", poll)
	if err != nil {
		return fail(err)
	}
	inst.procs = append(inst.procs, app)
	// The application creates the database and its schema; the tool's process waits
	// for them (both at once race to create the database).
	if err := waitFor(ctx, "the DBOS application", time.Minute, inst.procs, dialable(fmt.Sprintf("127.0.0.1:%d", httpPort))); err != nil {
		return fail(err)
	}
	if queue {
		tool, err := startProc("dbos-tool", dir, cleanEnv(), b.bin, "dbos-tool", "-db", dbURL, "-poll", poll)
		if err != nil {
			return fail(err)
		}
		inst.procs = append(inst.procs, tool)
	}
	inst.runner = newHTTPRunner(fmt.Sprintf("http://127.0.0.1:%d/run", httpPort))
	inst.check = func() error { return checkPGSync(dbURL, fsync) }
	return inst, nil
}

// checkPGSync asks PostgreSQL whether it flushes each commit (synchronous_commit) and
// syncs at all (fsync).
func checkPGSync(dbURL string, fsync bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	want := map[string]string{"synchronous_commit": "off", "fsync": "on"}
	if fsync {
		want["synchronous_commit"] = "on"
	}
	for name, w := range want {
		var got string
		if err := conn.QueryRow(ctx, "SHOW "+name).Scan(&got); err != nil {
			return fmt.Errorf("SHOW %s: %w", name, err)
		}
		if got != w {
			return fmt.Errorf("PostgreSQL's %s is %s, want %s", name, got, w)
		}
	}
	return nil
}

// httpRunner starts a run with POST <url>?steps=N and expects the answer "done".
type httpRunner struct {
	url string
	t   *http.Transport
	c   *http.Client
}

func newHTTPRunner(url string) *httpRunner {
	t := &http.Transport{MaxIdleConnsPerHost: 1024}
	return &httpRunner{url: url, t: t, c: &http.Client{Transport: t}}
}

func (r *httpRunner) Run(ctx context.Context, steps int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"?steps="+strconv.Itoa(steps), nil)
	if err != nil {
		return err
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "done" {
		return fmt.Errorf("answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

func (r *httpRunner) Retries() int64 { return 0 }

func (r *httpRunner) Close() error {
	r.t.CloseIdleConnections()
	return nil
}

// The DBOS application's settings, fixed before Launch: the tool's queue (nil when
// the tool is a step in the workflow's process) and how often its result is polled.
var (
	toolQueue  dbos.Queue
	resultPoll time.Duration
)

// toolQueueName is the queue the tool's child workflows go to.
const toolQueueName = "tool"

// agentWorkflow is the agent loop as a DBOS workflow: each model turn is a step, and
// so is each tool call, or a child workflow on the tool's queue.
func agentWorkflow(ctx dbos.Context, steps int) (string, error) {
	for i := range steps {
		call, err := dbos.RunAsStep(ctx, func(context.Context) (modelReply, error) { return modelTurn(i, steps), nil }, dbos.WithStepName("model"))
		if err != nil {
			return "", err
		}
		var out string
		if toolQueue == nil {
			out, err = dbos.RunAsStep(ctx, func(context.Context) (string, error) { return echo(call.Arguments), nil }, dbos.WithStepName("echo"))
		} else {
			var h dbos.WorkflowHandle[string]
			if h, err = dbos.RunWorkflow(ctx, echoWorkflow, call.Arguments, dbos.WithQueue(toolQueue)); err == nil {
				out, err = h.GetResult(dbos.WithHandlePollingInterval(resultPoll))
			}
		}
		if err != nil {
			return "", err
		}
		if out != call.Arguments {
			return "", fmt.Errorf("echo answered %q to %q", out, call.Arguments)
		}
	}
	final, err := dbos.RunAsStep(ctx, func(context.Context) (modelReply, error) { return modelTurn(steps, steps), nil }, dbos.WithStepName("model"))
	return final.Text, err
}

// echoWorkflow is the tool as a workflow of its own, for the queue layout.
func echoWorkflow(ctx dbos.Context, args string) (string, error) {
	return dbos.RunAsStep(ctx, func(context.Context) (string, error) { return echo(args), nil }, dbos.WithStepName("echo"))
}

// dbosContext makes a DBOS context for one of the application's processes; both
// processes of the queue layout are one application of one version.
func dbosContext(dbURL, executor string) (dbos.Context, error) {
	return dbos.NewContext(context.Background(), dbos.Config{
		AppName:            "peers",
		DatabaseURL:        dbURL,
		ApplicationVersion: "peers",
		ExecutorID:         executor,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// dbosApp is the DBOS application: POST /run?steps=N runs the agent workflow and
// answers with its result.
func dbosApp(args []string) error {
	fs := flag.NewFlagSet("dbos-app", flag.ContinueOnError)
	dbURL := fs.String("db", "", "PostgreSQL URL")
	addr := fs.String("http", "127.0.0.1:0", "listen address")
	queued := fs.Bool("queue", false, "run the tool as a child workflow on a queue served by dbos-tool")
	poll := fs.Duration("poll", time.Second, "queue and result polling interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dctx, err := dbosContext(*dbURL, "app")
	if err != nil {
		return err
	}
	dbos.RegisterWorkflow(dctx, agentWorkflow, dbos.WithWorkflowName("agent"))
	if *queued {
		dbos.RegisterWorkflow(dctx, echoWorkflow, dbos.WithWorkflowName("echo"))
		if toolQueue, err = dbos.RegisterQueue(dctx, toolQueueName, dbos.WithQueueBasePollingInterval(*poll)); err != nil {
			return err
		}
		resultPoll = *poll
		dbos.ListenQueues(dctx, "none") // the tool's queue is served by the other process only
	}
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	defer func() { _ = dbos.Shutdown(dctx, 5*time.Second) }()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /run", func(w http.ResponseWriter, r *http.Request) {
		steps, err := strconv.Atoi(r.URL.Query().Get("steps"))
		if err != nil || steps < 1 {
			http.Error(w, "steps: want a positive number", http.StatusBadRequest)
			return
		}
		h, err := dbos.RunWorkflow(dctx, agentWorkflow, steps)
		var answer string
		if err == nil {
			answer, err = h.GetResult()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, answer) // a client gone away sees no answer: its error
	})
	return serveUntil(ctx, *addr, mux)
}

// dbosTool serves the tool's queue.
func dbosTool(args []string) error {
	fs := flag.NewFlagSet("dbos-tool", flag.ContinueOnError)
	dbURL := fs.String("db", "", "PostgreSQL URL")
	poll := fs.Duration("poll", time.Second, "queue polling interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dctx, err := dbosContext(*dbURL, "tool")
	if err != nil {
		return err
	}
	dbos.RegisterWorkflow(dctx, agentWorkflow, dbos.WithWorkflowName("agent"))
	dbos.RegisterWorkflow(dctx, echoWorkflow, dbos.WithWorkflowName("echo"))
	if _, err := dbos.RegisterQueue(dctx, toolQueueName, dbos.WithQueueBasePollingInterval(*poll)); err != nil {
		return err
	}
	dbos.ListenQueues(dctx, toolQueueName)
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	<-ctx.Done()
	return dbos.Shutdown(dctx, 5*time.Second)
}

// serveUntil serves h on addr until ctx ends, then shuts the server down.
func serveUntil(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
