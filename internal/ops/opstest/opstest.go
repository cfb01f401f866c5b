// Package opstest checks a program's ops server from its tests: the probes answer, the
// metrics are there, readiness comes.
package opstest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

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

// WaitReady waits up to 30 seconds for /readyz on addr to answer 200.
func WaitReady(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := Get(tb, addr, "/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("/readyz still %d after 30s: %s", code, body)
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
