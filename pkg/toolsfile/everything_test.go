package toolsfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// everythingVersion is the reference server's version the test pins.
const everythingVersion = "2026.8.31"

// everythingServer installs @modelcontextprotocol/server-everything with npm once, into
// the user's cache directory, and returns its program; it skips the test when npm
// cannot (no node, no registry).
func everythingServer(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping the npm reference server @modelcontextprotocol/server-everything")
	}
	if os.Getenv("TOOLFLEET_SKIP_NPM") != "" {
		t.Skip("TOOLFLEET_SKIP_NPM is set: skipping the npm reference server @modelcontextprotocol/server-everything")
	}
	for _, prog := range []string{"node", "npm"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s is not in PATH: skipping the npm reference server @modelcontextprotocol/server-everything", prog)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	prefix := filepath.Join(cache, "toolfleet-test", "server-everything-"+everythingVersion)
	bin := filepath.Join(prefix, "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", prefix,
		"@modelcontextprotocol/server-everything@"+everythingVersion).CombinedOutput()
	if err != nil {
		t.Skipf("npm cannot install @modelcontextprotocol/server-everything@%s within 60s (%v): skipping; its output:\n%s", everythingVersion, err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("npm installed @modelcontextprotocol/server-everything but %s is missing: skipping", bin)
	}
	return bin
}

// The reference server of the MCP project, over stdio, declared in a tools file and
// called through the fleet.
func TestServerEverythingThroughTheFleet(t *testing.T) {
	bin := everythingServer(t)
	path := writeFile(t, "tools.yaml", `
mcpServers:
  - name: everything
    prefix: ev
    command:
      argv: [`+bin+`, stdio]
      passEnv: [PATH, HOME]
    connectTimeout: 60s
    defaults: {safe: true, idempotent: true}
    tools:
      get-env: {safe: false}
`)
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := tools.NewRegistry()
	servers, err := file.Start(ctx, reg, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer servers.Close()
	names := servers[0].Names()
	t.Logf("imported: %v", names)
	for _, want := range []string{"ev_echo", "ev_get-sum", "ev_get-structured-content", "ev_get-tiny-image", "ev_get-env"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not imported: %v", want, names)
		}
	}
	sum, _ := reg.Lookup("ev_get-sum")
	var schema struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(sum.Parameters, &schema); err != nil || schema.Properties["a"].Type != "number" || !slices.Equal(schema.Required, []string{"a", "b"}) {
		t.Errorf("ev_get-sum parameters %s, want the server's schema (a, b numbers, required)", sum.Parameters)
	}
	if env, _ := reg.Lookup("ev_get-env"); env.Safe {
		t.Error("ev_get-env is safe; its override says not")
	}

	c, fleetCtx := serve(t, reg)
	call := func(tool, args string) (events.Result, error) {
		t.Helper()
		return callTool(fleetCtx, t, c, tool, args)
	}

	res, err := call("ev_echo", `{"message":"hello fleet"}`)
	var text string
	if err != nil || json.Unmarshal(res.Output, &text) != nil || !strings.Contains(text, "hello fleet") {
		t.Errorf("ev_echo: %s %v, want a text saying hello fleet", res.Output, err)
	}
	res, err = call("ev_get-sum", `{"a":2,"b":40}`)
	if err != nil || !strings.Contains(string(res.Output), "42") {
		t.Errorf("ev_get-sum: %s %v, want 42 in the answer", res.Output, err)
	}
	res, err = call("ev_get-structured-content", `{"location":"Chicago"}`)
	var weather map[string]any
	if err != nil || json.Unmarshal(res.Output, &weather) != nil || len(weather) == 0 {
		t.Errorf("ev_get-structured-content: %s %v, want its structured content, an object", res.Output, err)
	}
	res, err = call("ev_get-tiny-image", `{}`)
	var content struct {
		Content []struct {
			Type string `json:"type"`
		} `json:"content"`
	}
	if err != nil || json.Unmarshal(res.Output, &content) != nil || !slices.ContainsFunc(content.Content, func(c struct {
		Type string `json:"type"`
	}) bool {
		return c.Type == "image"
	}) {
		t.Errorf("ev_get-tiny-image: %.300s %v, want {\"content\": [..., an image, ...]}", res.Output, err)
	}

	// Arguments that break the server's schema are answered invalid by the executor.
	res, err = call("ev_get-sum", `{"a":"two","b":40}`)
	if res.Status != events.StatusInvalid || !errors.Is(err, tools.ErrInvalidInput) {
		t.Errorf("ev_get-sum with a string: %s %v, want invalid", res.Status, err)
	}
	res, err = call("ev_get-structured-content", `{"location":"Atlantis"}`)
	if res.Status != events.StatusInvalid {
		t.Errorf("ev_get-structured-content outside its enum: %s %v, want invalid", res.Status, err)
	}
}
