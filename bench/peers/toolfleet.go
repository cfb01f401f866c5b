package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// buildToolfleet builds the planner, the executor and the nats-server of the
// repository's go.mod into the cache, as a user deploys them: three programs.
func (b *bench) buildToolfleet(ctx context.Context) error {
	dir := filepath.Join(b.cfg.Cache, "toolfleet")
	for _, p := range [][2]string{
		{"planner", "./cmd/planner"},
		{"executor", "./cmd/executor"},
		{"nats-server", "github.com/nats-io/nats-server/v2"},
	} {
		name, pkg := p[0], p[1]
		fmt.Fprintf(b.log, "building %s (%s in %s)\n", name, pkg, b.cfg.Repo)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, name), pkg)
		cmd.Dir = b.cfg.Repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return nil
}

// The models of the runs: an instant scripted turn that calls echo, the call, ..., then
// a turn that answers. Each step's arguments differ, so that no loop is detected.
func toolfleetScript(steps int) string {
	var s strings.Builder
	s.WriteString("steps:\n")
	for i := range steps {
		fmt.Fprintf(&s, "  - calls: [{name: echo, arguments: {value: step %d}}]\n", i+1)
	}
	s.WriteString("  - text: done\n")
	return s.String()
}

// modelFor is the scripted model's name for a run of steps tool steps.
func modelFor(steps int) string { return fmt.Sprintf("steps%d", steps) }

// startToolfleet starts nats-server (JetStream on file storage in dir), a planner
// and an executor serving echo, each its own process.
func (b *bench) startToolfleet(ctx context.Context, dir string, fsync bool) (*instance, error) {
	bin := filepath.Join(b.cfg.Cache, "toolfleet")
	natsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// JetStream's default sync_interval (2m) is no fsync at commit; "always" syncs
	// every write before acknowledging it.
	sync := ""
	if fsync {
		sync = "\n  sync_interval: always"
	}
	monPort, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream {\n  store_dir: %q%s\n}\n",
		natsPort, monPort, filepath.Join(dir, "jetstream"), sync)
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	args := []string{filepath.Join(bin, "planner"), "-nats-url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort),
		"-http-addr", fmt.Sprintf("127.0.0.1:%d", httpPort), "-ops-addr", "off", "-log-level", "warn", "-picker=false"}
	for _, steps := range []int{1, b.cfg.Steps} {
		path := filepath.Join(dir, modelFor(steps)+".yaml")
		if err := os.WriteFile(path, []byte(toolfleetScript(steps)), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "-script", modelFor(steps)+"="+path)
	}
	env := cleanEnv()
	inst := &instance{}
	stopAll := func() {
		// The workers first, then the server they need to stop cleanly.
		for i := len(inst.procs) - 1; i >= 0; i-- {
			inst.procs[i].stop(syscall.SIGTERM, 10*time.Second)
		}
	}
	inst.stop = stopAll
	fail := func(err error) (*instance, error) { stopAll(); return nil, err }

	srv, err := startProc("nats-server", dir, env, filepath.Join(bin, "nats-server"), "-c", filepath.Join(dir, "nats.conf"))
	if err != nil {
		return fail(err)
	}
	inst.procs = append(inst.procs, srv)
	if err := waitFor(ctx, "nats-server", 30*time.Second, inst.procs, dialable(fmt.Sprintf("127.0.0.1:%d", natsPort))); err != nil {
		return fail(err)
	}
	planner, err := startProc("planner", dir, env, args...)
	if err != nil {
		return fail(err)
	}
	inst.procs = append(inst.procs, planner)
	executor, err := startProc("executor", dir, env, filepath.Join(bin, "executor"),
		"-nats-url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort), "-builtins", "echo", "-ops-addr", "off",
		"-log-level", "warn", "-executor-id", "peers")
	if err != nil {
		return fail(err)
	}
	inst.procs = append(inst.procs, executor)
	r, err := newToolfleetRunner(fmt.Sprintf("http://127.0.0.1:%d", httpPort))
	if err != nil {
		return fail(err)
	}
	inst.runner = r
	inst.check = func() error { return checkNATSSync(fmt.Sprintf("http://127.0.0.1:%d/varz", monPort), fsync) }
	return inst, nil
}

// checkNATSSync asks the server's monitoring endpoint whether it syncs every write.
func checkNATSSync(varz string, always bool) error {
	resp, err := http.Get(varz)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var v struct {
		JetStream struct {
			Config struct {
				SyncAlways bool `json:"sync_always"`
			} `json:"config"`
		} `json:"jetstream"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return fmt.Errorf("nats-server's /varz: %w", err)
	}
	if v.JetStream.Config.SyncAlways != always {
		return fmt.Errorf("nats-server's sync_always is %v, want %v", v.JetStream.Config.SyncAlways, always)
	}
	return nil
}

// toolfleetRunner starts runs with POST /v1/runs and wait, through pkg/client/runs,
// which retries a 429 as its users' programs do.
type toolfleetRunner struct {
	c       *runs.Client
	t       *http.Transport
	retried atomic.Int64
}

func newToolfleetRunner(url string) (*toolfleetRunner, error) {
	r := &toolfleetRunner{t: &http.Transport{MaxIdleConnsPerHost: 1024}}
	c, err := runs.New(url, runs.WithHTTPClient(&http.Client{Transport: countRetries{r.t, &r.retried}}), runs.WithRetries(100))
	if err != nil {
		return nil, err
	}
	r.c = c
	return r, nil
}

// countRetries counts the answers the runs client sends its request again for.
type countRetries struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countRetries) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		c.n.Add(1)
	}
	return resp, err
}

func (r *toolfleetRunner) Run(ctx context.Context, steps int) error {
	run, err := r.c.Start(ctx, runs.StartRequest{Input: "hi", Model: modelFor(steps), Tools: []string{"echo"}, Wait: true})
	if err != nil {
		return err
	}
	if run.Status != "done" || run.Termination != "completed" || run.Answer != "done" {
		return fmt.Errorf("run %s ended %s %s (%s), answer %q; want done, completed, \"done\"", run.ID, run.Status, run.Termination, run.Detail, run.Answer)
	}
	if len(run.Calls) != steps {
		return fmt.Errorf("run %s made %d calls, want %d", run.ID, len(run.Calls), steps)
	}
	for _, c := range run.Calls {
		if c.Status != "ok" {
			return fmt.Errorf("run %s: call %s of %s ended %s: %v", run.ID, c.ID, c.Name, c.Status, c.Error)
		}
	}
	return nil
}

func (r *toolfleetRunner) Retries() int64 { return r.retried.Load() }

func (r *toolfleetRunner) Close() error {
	r.t.CloseIdleConnections()
	return nil
}
