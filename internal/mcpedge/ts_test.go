package mcpedge_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tsSDKVersion is the official TypeScript SDK's version the test pins.
const tsSDKVersion = "1.32.2"

// tsClient installs @modelcontextprotocol/sdk with npm once, into the user's cache
// directory, puts testdata/tsclient.mjs beside it and returns the script's path; it
// skips the test when npm cannot (no node, no registry).
func tsClient(t *testing.T) string {
	t.Helper()
	const what = "the official TypeScript SDK client @modelcontextprotocol/sdk"
	if testing.Short() {
		t.Skip("-short: skipping " + what)
	}
	if os.Getenv("TOOLFLEET_SKIP_NPM") != "" {
		t.Skip("TOOLFLEET_SKIP_NPM is set: skipping " + what)
	}
	for _, prog := range []string{"node", "npm"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s is not in PATH: skipping %s", prog, what)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	prefix := filepath.Join(cache, "toolfleet-test", "mcp-sdk-"+tsSDKVersion)
	pkg := filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if _, err := os.Stat(pkg); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", prefix,
			"@modelcontextprotocol/sdk@"+tsSDKVersion).CombinedOutput()
		if err != nil {
			t.Skipf("npm cannot install @modelcontextprotocol/sdk@%s within 90s (%v): skipping %s; its output:\n%s", tsSDKVersion, err, what, out)
		}
		if _, err := os.Stat(pkg); err != nil {
			t.Skipf("npm installed @modelcontextprotocol/sdk but %s is missing: skipping", pkg)
		}
	}
	script, err := os.ReadFile(filepath.Join("testdata", "tsclient.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Beside node_modules, so that node resolves the SDK's imports from it.
	path := filepath.Join(prefix, "mcpedge-tsclient.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The official TypeScript SDK's client (an older protocol: it initializes) lists the
// caller's tools, calls one, gets the violations of an invalid call as a tool error and
// an unknown tool as a JSON-RPC error.
func TestTypeScriptClient(t *testing.T) {
	script := tsClient(t)
	f := startFleet(t)
	url, _ := f.edge(t, testAuth, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", script, url, userToken).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node tsclient.mjs: %v\n%s%s", err, out, stderr)
	}
	t.Logf("TypeScript client: %s", out)
	type content struct {
		Type, Text string
	}
	type result struct {
		Content           []content       `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	var got struct {
		Tools     []string
		AddSchema map[string]any
		OK        result
		Invalid   result
		Unknown   *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !slices.Equal(got.Tools, anonymousTools) {
		t.Errorf("tools %v, want %v (admin_reset hidden from role user)", got.Tools, anonymousTools)
	}
	if got.AddSchema["type"] != "object" || got.AddSchema["additionalProperties"] != false {
		t.Errorf("add's schema %v", got.AddSchema)
	}
	if got.OK.IsError || len(got.OK.Content) != 1 || got.OK.Content[0].Text != `{"sum":42}` || string(got.OK.StructuredContent) != `{"sum":42}` {
		t.Errorf("add: %+v", got.OK)
	}
	if !got.Invalid.IsError || len(got.Invalid.Content) == 0 || !strings.Contains(got.Invalid.Content[0].Text, "missing property 'b'") {
		t.Errorf("invalid add: %+v", got.Invalid)
	}
	if got.Unknown == nil || got.Unknown.Code != -32602 {
		t.Errorf("unknown tool: %+v", got.Unknown)
	}
}
