package plannercmd

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
)

// cleanEnv empties every TOOLFLEET_ variable for the test, so the machine's environment
// cannot leak in (t.Setenv: not parallel).
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "TOOLFLEET_") {
			t.Setenv(name, "")
		}
	}
}

func TestParse(t *testing.T) {
	cleanEnv(t)
	c, err := Parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != DefaultHTTPAddr || c.StreamReplicas != 1 || !c.UsePicker || c.Token != "" ||
		c.Ops.Addr != ops.DefaultAddr || c.Ops.LogLevel != zerolog.InfoLevel || c.NATS.URL != "nats://127.0.0.1:4222" {
		t.Fatalf("defaults %+v", c)
	}

	t.Setenv("TOOLFLEET_HTTP_ADDR", "127.0.0.1:9999")
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "3")
	t.Setenv("TOOLFLEET_API_TOKEN", "s3cret")
	t.Setenv("TOOLFLEET_OPS_ADDR", ":9191")
	t.Setenv("TOOLFLEET_LOG_LEVEL", "warn")
	t.Setenv("TOOLFLEET_NATS_URL", "nats://nats:4222")
	c, err = Parse([]string{"-script", "a=a.yaml", "-script", "b=b.yaml", "-picker=false", "-log-level", "debug"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9999" || c.StreamReplicas != 3 || c.Token != "s3cret" || c.UsePicker ||
		!slices.Equal(c.Scripts, []string{"a=a.yaml", "b=b.yaml"}) || c.Ops.Addr != ":9191" ||
		c.Ops.LogLevel != zerolog.DebugLevel || c.NATS.URL != "nats://nats:4222" {
		t.Fatalf("config %+v", c)
	}
}

// Every error names the setting it is about.
func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"malformed replicas variable", map[string]string{"TOOLFLEET_STREAM_REPLICAS": "three"}, nil, `TOOLFLEET_STREAM_REPLICAS="three"`},
		{"replicas out of range", nil, []string{"-stream-replicas", "7"}, "-stream-replicas: must be 1 to 5, got 7"},
		{"script without a name", nil, []string{"-script", "demo.yaml"}, `-script: want name=path, got "demo.yaml"`},
		{"bad ops address", nil, []string{"-ops-addr", "9090"}, `-ops-addr "9090"`},
		{"bad log level", map[string]string{"TOOLFLEET_LOG_LEVEL": "loud"}, nil, `TOOLFLEET_LOG_LEVEL "loud"`},
		{"TLS certificate without its key", nil, []string{"-nats-tls-cert", "cert.pem"}, "nats: give both a TLS certificate and its key"},
		{"stray argument", nil, []string{"serve"}, "unexpected arguments"},
		{"an executor's old flag", nil, []string{"-metrics-addr", ":9090"}, "flag provided but not defined: -metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if _, err := Parse(tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	cleanEnv(t)
	var out strings.Builder
	_, err := Parse([]string{"-h"}, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "TOOLFLEET_OPS_ADDR") || !strings.Contains(out.String(), "TOOLFLEET_HTTP_ADDR") {
		t.Fatalf("Parse -h = %v, usage %q", err, out.String())
	}
}

func TestModels(t *testing.T) {
	cleanEnv(t)
	t.Setenv("TOOLFLEET_MODEL", "")
	if _, _, err := (Config{}).Models(); err == nil || !strings.Contains(err.Error(), "no model: set TOOLFLEET_MODEL") {
		t.Errorf("no model: %v", err)
	}
	if _, _, err := (Config{Scripts: []string{"a=" + filepath.Join(t.TempDir(), "missing.yaml")}}).Models(); err == nil || !strings.Contains(err.Error(), "-script a=") {
		t.Errorf("a missing script: %v", err)
	}
}
