package executorcli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

func TestParseDefaults(t *testing.T) {
	opstest.Env(t, nil)
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
	opstest.Env(t, nil)
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
	t.Setenv("TOOLFLEET_OPERATOR_ROLES", "ops, oncall")

	// Flags win over the environment.
	c, err := Parse([]string{"-concurrency", "2", "-ops-addr", "off"}, io.Discard)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.NATS.URL != "nats://nats-a:4222,nats://nats-b:4222" || c.Concurrency != 2 || c.SandboxRoot != dir ||
		!slices.Equal(c.HTTPAllowlist, []string{"api.example.com", "*.wiki.org"}) || c.ToolsFile != toolsFile ||
		c.Ops.LogLevel != zerolog.DebugLevel || c.GracePeriod != time.Minute || c.ExecutorID != "executor-7f9c" || c.StreamReplicas != 3 || c.Ops.Addr != "" ||
		!slices.Equal(c.Builtins, []string{"calculator", "read_file"}) || !slices.Equal(c.OperatorRoles, []string{"ops", "oncall"}) {
		t.Fatalf("config = %+v", c)
	}
	if c, err := Parse([]string{"-operator-roles", "admin", "-ops-addr", "off"}, io.Discard); err != nil || !slices.Equal(c.OperatorRoles, []string{"admin"}) {
		t.Fatalf("-operator-roles admin: %v, %v", c.OperatorRoles, err)
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
	opstest.Refuses(t, Parse, []opstest.Refusal{
		{Name: "bad concurrency env", Env: map[string]string{"TOOLFLEET_CONCURRENCY": "many"}, Says: `TOOLFLEET_CONCURRENCY="many" is not a whole number`},
		{Name: "zero concurrency", Args: []string{"-concurrency", "0"}, Says: "-concurrency (TOOLFLEET_CONCURRENCY): must be at least 1"},
		{Name: "negative grace period", Args: []string{"-grace-period", "-1s"}, Says: "-grace-period (TOOLFLEET_GRACE_PERIOD): cannot be negative"},
		{Name: "bad grace env", Env: map[string]string{"TOOLFLEET_GRACE_PERIOD": "30"}, Says: `TOOLFLEET_GRACE_PERIOD="30" is not a duration`},
		{Name: "bad replicas", Args: []string{"-stream-replicas", "7"}, Says: "-stream-replicas (TOOLFLEET_STREAM_REPLICAS): must be 1 to 5, got 7"},
		{Name: "empty executor id", Args: []string{"-executor-id", ""}, Says: "executor id is empty"},
		{Name: "bad operator role", Args: []string{"-operator-roles", "ops,a.b"}, Says: `role "a.b" is not allowed`},
		{Name: "unknown flag", Args: []string{"-colour"}, Says: "flag provided but not defined"},
		{Name: "stray argument", Args: []string{"serve"}, Says: "unexpected arguments"},
		{Name: "TLS cert without key", Env: map[string]string{"TOOLFLEET_NATS_TLS_CERT": file}, Says: "both a TLS certificate and its key"},
		{Name: "missing creds file", Args: []string{"-nats-creds", filepath.Join(dir, "nope.creds")}, Says: "credentials file"},
		{Name: "missing sandbox", Args: []string{"-sandbox-root", filepath.Join(dir, "nope")}, Says: "sandbox root"},
		{Name: "bad allowlist", Args: []string{"-http-allowlist", "https://example.com/"}, Says: "allowlist pattern"},
		{Name: "unknown builtin", Args: []string{"-builtins", "calculator,shell"}, Says: `unknown built-in tool "shell"`},
		{Name: "tools file missing", Args: []string{"-tools-file", filepath.Join(dir, "tools.yaml")}, Says: "tools file"},
		{Name: "tools file extension", Args: []string{"-tools-file", file}, Says: `extension ".txt"`},
		{Name: "bad ops address", Args: []string{"-ops-addr", "9090"}, Says: `-ops-addr "9090"`},
		{Name: "bad ops address env", Env: map[string]string{"TOOLFLEET_OPS_ADDR": "host:http"}, Says: `TOOLFLEET_OPS_ADDR "host:http": port "http"`},
		{Name: "bad old metrics address", Args: []string{"-metrics-addr", "9090"}, Says: `-metrics-addr "9090"`},
		{Name: "bad log level", Args: []string{"-log-level", "loud"}, Says: `-log-level "loud"`},
		{Name: "bad log level env", Env: map[string]string{"TOOLFLEET_LOG_LEVEL": "loud"}, Says: `TOOLFLEET_LOG_LEVEL "loud"`},
	})
}

// The executor's older names of the ops address still work, below the new ones, and
// leave a deprecation warning for Run to log (internal/ops tests the precedence).
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opstest.Env(t, tt.env)
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
	opstest.Help(t, Parse, "TOOLFLEET_SANDBOX_ROOT")
}

func TestRegistryRefusesNothingToServeAndBadToolsFiles(t *testing.T) {
	opstest.Env(t, nil)
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
	if _, err := c.Registry(); !errors.Is(err, toolsfile.ErrInvalidFile) {
		t.Fatalf("Registry with a tools file shadowing a built-in = %v", err)
	}
}
