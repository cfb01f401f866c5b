// Package opstest tests toolfleet's programs as they are operated: a clean environment
// to parse, a program running until the test stops it, its ops server (the probes
// answer, the metrics are there, readiness comes), its logs and its exit codes.
package opstest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Env empties every TOOLFLEET_ variable for the test, so that the machine's environment
// cannot leak in, then sets the ones given. Tests that use it cannot be parallel.
func Env(t *testing.T, env map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "TOOLFLEET_") {
			t.Setenv(name, "")
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// Run runs a program's run function until the test calls stop, which ends its context
// and returns what run returned; stop fails the test if run takes more than 30 seconds
// to return.
func Run(tb testing.TB, run func(context.Context) error) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	tb.Cleanup(cancel)
	return func() error {
		tb.Helper()
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			tb.Fatal("the program did not return within 30s of the end of its context")
			return nil
		}
	}
}

// ExitCode runs cmd and returns its exit code and combined output; a command that
// cannot start fails the test.
func ExitCode(tb testing.TB, cmd *exec.Cmd) (int, string) {
	tb.Helper()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return 0, string(out)
}

// FreeAddr returns a loopback address with a port nothing listens on now, for a program
// that must be told its ops address before it starts.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Log is a log destination safe for a program's goroutines and the test to share.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Lines returns the lines logged so far that contain every one of parts.
func (l *Log) Lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		match := line != ""
		for _, p := range parts {
			match = match && strings.Contains(line, p)
		}
		if match {
			out = append(out, line)
		}
	}
	return out
}

// String returns everything logged so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Get returns the status code and body of GET http://addr/path, failing the test when
// the server cannot be reached.
func Get(tb testing.TB, addr, path string) (int, string) {
	tb.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		tb.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// WaitReady waits up to 30 seconds for /readyz on addr to answer 200, also while the
// server is not listening yet.
func WaitReady(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last := "no answer"
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status + ": " + string(body)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("/readyz not 200 after 30s: %s", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Serves checks that /healthz answers 200 and that /metrics answers 200 with the Go
// runtime's metrics and every family named in metrics.
func Serves(tb testing.TB, addr string, metrics ...string) {
	tb.Helper()
	if code, body := Get(tb, addr, "/healthz"); code != http.StatusOK {
		tb.Errorf("/healthz: %d %s", code, body)
	}
	code, body := Get(tb, addr, "/metrics")
	if code != http.StatusOK {
		tb.Fatalf("/metrics: %d", code)
	}
	for _, m := range append([]string{"go_goroutines", "process_cpu_seconds_total"}, metrics...) {
		if !strings.Contains(body, "\n"+m) {
			tb.Errorf("/metrics lacks %s:\n%.1500s", m, body)
		}
	}
}

// Metrics gathers g as a user reads its /metrics: each series' value under its name
// and labels, name{label="value",...} (labels sorted by name), a histogram's count as
// name_count{...}.
func Metrics(tb testing.TB, g prometheus.Gatherer) map[string]float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.Counter != nil:
				out[mf.GetName()+key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[mf.GetName()+key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[mf.GetName()+"_count"+key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// Refusal is a command line and environment a program's Parse must refuse, and what its
// error must say: the setting at fault, by name.
type Refusal struct {
	Name string
	Env  map[string]string
	Args []string
	Says string
}

// Defaults returns what parse makes of no arguments in an environment without any
// TOOLFLEET_ variable, failing t when it refuses them.
func Defaults[C any](t *testing.T, parse func([]string, io.Writer) (C, error)) C {
	t.Helper()
	Env(t, nil)
	c, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	return c
}

// Refuses checks, one subtest each, that parse refuses every case with an error that
// says what the case wants.
func Refuses[C any](t *testing.T, parse func([]string, io.Writer) (C, error), cases []Refusal) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			Env(t, tc.Env)
			if _, err := parse(tc.Args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.Says) {
				t.Fatalf("error %v, want it to say %q", err, tc.Says)
			}
		})
	}
}

// Help checks that -h makes parse return flag.ErrHelp after writing a usage that
// mentions every one of mentions.
func Help[C any](t *testing.T, parse func([]string, io.Writer) (C, error), mentions ...string) {
	t.Helper()
	Env(t, nil)
	var out strings.Builder
	_, err := parse([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	for _, m := range mentions {
		if !strings.Contains(out.String(), m) {
			t.Errorf("the usage does not mention %s:\n%s", m, out.String())
		}
	}
}
