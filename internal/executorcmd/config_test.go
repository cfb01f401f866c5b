package executorcmd

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
)

// cleanEnv empties every TOOLFLEET_ variable for the test, so the machine's environment
// cannot leak in. Tests that use it cannot run in parallel (t.Setenv).
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "TOOLFLEET_") {
			t.Setenv(name, "")
		}
	}
	for _, name := range []string{"TOOLFLEET_NATS_URL", "TOOLFLEET_CONCURRENCY", "TOOLFLEET_BUILTINS", "TOOLFLEET_SANDBOX_ROOT",
		"TOOLFLEET_HTTP_ALLOWLIST", "TOOLFLEET_TOOLS_FILE", "TOOLFLEET_METRICS_ADDR", "TOOLFLEET_OPS_ADDR", "TOOLFLEET_LOG_LEVEL", "TOOLFLEET_GRACE_PERIOD", "TOOLFLEET_EXECUTOR_ID", "TOOLFLEET_STREAM_REPLICAS"} {
		t.Setenv(name, "")
	}
}

func TestParseDefaults(t *testing.T) {
	cleanEnv(t)
	c, err := Parse(nil, io.Discard)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.NATS.URL != "nats://127.0.0.1:4222" || c.Concurrency != DefaultConcurrency || c.Builtins != nil ||
		c.Ops.Addr != ops.DefaultAddr || c.Ops.LogLevel != zerolog.InfoLevel || len(c.Ops.Deprecated) > 0 || c.GracePeriod != DefaultGracePeriod || c.StreamReplicas != 1 || c.ExecutorID == "" {
		t.Fatalf("defaults = %+v", c)
	}
	reg, err := c.Registry()
	if err != nil {
		t.Fatalf("Registry: %v", err)
	}
	if _, ok := reg.Lookup("calculator"); !ok {
		t.Fatal("the default registry lacks calculator")
	}
	if _, ok := reg.Lookup("read_file"); ok {
		t.Fatal("read_file is served without a sandbox root")
	}
}

func TestParseFromTheEnvironmentAndFlags(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	toolsFile := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(toolsFile, []byte("tools:\n  - {name: shout, parameters: {type: object}, command: {argv: [cat]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLFLEET_NATS_URL", "nats://nats-a:4222,nats://nats-b:4222")
	t.Setenv("TOOLFLEET_CONCURRENCY", "16")
	t.Setenv("TOOLFLEET_SANDBOX_ROOT", dir)
	t.Setenv("TOOLFLEET_HTTP_ALLOWLIST", "api.example.com, *.wiki.org,")
	t.Setenv("TOOLFLEET_TOOLS_FILE", toolsFile)
	t.Setenv("TOOLFLEET_LOG_LEVEL", "debug")
	t.Setenv("TOOLFLEET_GRACE_PERIOD", "1m")
	t.Setenv("TOOLFLEET_EXECUTOR_ID", "executor-7f9c")
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "3")
	t.Setenv("TOOLFLEET_BUILTINS", "calculator,read_file")

	// Flags win over the environment.
	c, err := Parse([]string{"-concurrency", "2", "-ops-addr", "off"}, io.Discard)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.NATS.URL != "nats://nats-a:4222,nats://nats-b:4222" || c.Concurrency != 2 || c.SandboxRoot != dir ||
		!slices.Equal(c.HTTPAllowlist, []string{"api.example.com", "*.wiki.org"}) || c.ToolsFile != toolsFile ||
		c.Ops.LogLevel != zerolog.DebugLevel || c.GracePeriod != time.Minute || c.ExecutorID != "executor-7f9c" || c.StreamReplicas != 3 || c.Ops.Addr != "" ||
		!slices.Equal(c.Builtins, []string{"calculator", "read_file"}) {
		t.Fatalf("config = %+v", c)
	}
	reg, err := c.Registry()
	if err != nil {
		t.Fatalf("Registry: %v", err)
	}
	var names []string
	for _, d := range reg.Definitions() {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"calculator", "read_file", "shout"}) {
		t.Fatalf("served %v, want calculator, read_file and the tools file's shout", names)
	}
}

func TestParseRefuses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		fragment string
	}{
		{"bad concurrency env", map[string]string{"TOOLFLEET_CONCURRENCY": "many"}, nil, `TOOLFLEET_CONCURRENCY="many" is not a whole number`},
		{"zero concurrency", nil, []string{"-concurrency", "0"}, "concurrency must be at least 1"},
		{"bad grace env", map[string]string{"TOOLFLEET_GRACE_PERIOD": "30"}, nil, `TOOLFLEET_GRACE_PERIOD="30" is not a duration`},
		{"bad replicas", nil, []string{"-stream-replicas", "7"}, "stream replicas must be 1 to 5, got 7"},
		{"empty executor id", nil, []string{"-executor-id", ""}, "executor id is empty"},
		{"unknown flag", nil, []string{"-colour"}, "flag provided but not defined"},
		{"stray argument", nil, []string{"serve"}, "unexpected arguments"},
		{"TLS cert without key", map[string]string{"TOOLFLEET_NATS_TLS_CERT": file}, nil, "both a TLS certificate and its key"},
		{"missing creds file", nil, []string{"-nats-creds", filepath.Join(dir, "nope.creds")}, "credentials file"},
		{"missing sandbox", nil, []string{"-sandbox-root", filepath.Join(dir, "nope")}, "sandbox root"},
		{"bad allowlist", nil, []string{"-http-allowlist", "https://example.com/"}, "allowlist pattern"},
		{"unknown builtin", nil, []string{"-builtins", "calculator,shell"}, `unknown built-in tool "shell"`},
		{"tools file missing", nil, []string{"-tools-file", filepath.Join(dir, "tools.yaml")}, "tools file"},
		{"tools file extension", nil, []string{"-tools-file", file}, `extension ".txt"`},
		{"bad ops address", nil, []string{"-ops-addr", "9090"}, `-ops-addr "9090"`},
		{"bad ops address env", map[string]string{"TOOLFLEET_OPS_ADDR": "host:http"}, nil, `TOOLFLEET_OPS_ADDR "host:http": port "http"`},
		{"bad old metrics address", nil, []string{"-metrics-addr", "9090"}, `-metrics-addr "9090"`},
		{"bad log level", nil, []string{"-log-level", "loud"}, `-log-level "loud"`},
		{"bad log level env", map[string]string{"TOOLFLEET_LOG_LEVEL": "loud"}, nil, `TOOLFLEET_LOG_LEVEL "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := Parse(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.fragment) {
				t.Fatalf("Parse error = %v, want it to mention %q", err, tt.fragment)
			}
		})
	}
}

// The older names of the ops address still work, below the new ones, and leave a
// deprecation warning for Run to log.
func TestParseOldOpsAddressNames(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		addr     string
		warnings int
	}{
		{"old flag", nil, []string{"-metrics-addr", ":9191"}, ":9191", 1},
		{"old variable", map[string]string{"TOOLFLEET_METRICS_ADDR": ":9292"}, nil, ":9292", 1},
		{"new variable over old one", map[string]string{"TOOLFLEET_METRICS_ADDR": ":9292", "TOOLFLEET_OPS_ADDR": ":9393"}, nil, ":9393", 0},
		{"new flag over old flag", nil, []string{"-metrics-addr", ":9191", "-ops-addr", "off"}, "", 0},
		{"old flag over new variable", map[string]string{"TOOLFLEET_OPS_ADDR": ":9393"}, []string{"-metrics-addr", "off"}, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := Parse(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Ops.Addr != tt.addr || len(c.Ops.Deprecated) != tt.warnings {
				t.Fatalf("ops address %q with warnings %q, want %q and %d", c.Ops.Addr, c.Ops.Deprecated, tt.addr, tt.warnings)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	cleanEnv(t)
	var out strings.Builder
	_, err := Parse([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "TOOLFLEET_SANDBOX_ROOT") {
		t.Fatalf("Parse -h = %v, usage %q", err, out.String())
	}
}

func TestRegistryRefusesNothingToServeAndBadToolsFiles(t *testing.T) {
	cleanEnv(t)
	c, err := Parse([]string{"-builtins", "none"}, io.Discard)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if _, err := c.Registry(); err == nil || !strings.Contains(err.Error(), "no tool to serve") {
		t.Fatalf("Registry with nothing = %v", err)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(bad, []byte(`{"tools":[{"name":"calculator","parameters":{"type":"object"},"command":{"argv":["cat"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = Parse([]string{"-tools-file", bad}, io.Discard)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if _, err := c.Registry(); err == nil || !strings.Contains(err.Error(), `"calculator" is already registered`) {
		t.Fatalf("Registry with a tools file shadowing a built-in = %v", err)
	}
}
