package plannercli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

// Run serves on an embedded JetStream until its context ends: the ops server (metrics,
// probes) and the API (a run answered by a scripted model) on their own ports.
func TestRun(t *testing.T) {
	opstest.Env(t, nil)
	t.Setenv("TOOLFLEET_MODEL", "")
	srv := natstest.Start(t)
	script := filepath.Join(t.TempDir(), "hello.yaml")
	if err := os.WriteFile(script, []byte("steps:\n  - text: hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opsAddr, apiAddr := opstest.FreeAddr(t), opstest.FreeAddr(t)
	c, err := Parse([]string{"-nats-url", srv.URL(), "-ops-addr", opsAddr, "-http-addr", apiAddr, "-script", "hello=" + script}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log opstest.Log
	c.Ops.LogTo = &log
	stop := opstest.Run(t, func(ctx context.Context) error { return Run(ctx, c) })

	opstest.WaitReady(t, opsAddr)
	opstest.Serves(t, opsAddr)
	for _, probe := range []string{"/healthz", "/readyz"} { // kept on the API's port too
		if code, body := opstest.Get(t, apiAddr, probe); code != http.StatusOK {
			t.Errorf("API %s: %d %s", probe, code, body)
		}
	}
	resp, err := http.Post("http://"+apiAddr+"/v1/runs", "application/json", strings.NewReader(`{"input":"hi","wait":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var run struct{ Answer string }
	err = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || run.Answer != "hello" {
		t.Errorf("POST /v1/runs: %d %+v %v", resp.StatusCode, run, err)
	}
	// The MCP edge is mounted at /mcp of the API's address: an official SDK client lists
	// the catalog (empty: no executor here).
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + apiAddr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.ListTools(t.Context(), nil); err != nil || len(res.Tools) != 0 {
		t.Errorf("MCP tools/list at /mcp: %+v %v", res, err)
	}
	_ = cs.Close()
	if got := log.Lines(`"service":"planner"`, `"message":"planner API listening"`, `"default_model":"hello"`, `"mcp":"/mcp"`); len(got) != 1 {
		t.Errorf("start not logged:\n%s", log.String())
	}
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
}
