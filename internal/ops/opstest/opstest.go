// Package opstest checks a program's ops server and logs from its tests: the probes
// answer, the metrics are there, readiness comes, the log says what it should.
package opstest

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

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
