package pickercmd

import (
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

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
	if c.Ops.Addr != ops.DefaultAddr || c.Ops.LogLevel != zerolog.InfoLevel || c.StreamReplicas != 1 || c.Timeout != 2*time.Second ||
		c.EmbeddingsURL != "" || c.EmbeddingsModel != "text-embedding-3-small" || c.NATS.Name != "toolfleet-picker" {
		t.Fatalf("defaults %+v", c)
	}

	t.Setenv("TOOLFLEET_NATS_URL", "nats://example:4222")
	t.Setenv("TOOLFLEET_NATS_USER", "picker")
	t.Setenv("TOOLFLEET_NATS_PASSWORD", "secret")
	t.Setenv("TOOLFLEET_OPS_ADDR", ":9191")
	t.Setenv("TOOLFLEET_LOG_LEVEL", "debug")
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "3")
	t.Setenv("TOOLFLEET_EMBEDDINGS_API_KEY", "sk-x")
	c, err = Parse([]string{"-timeout", "150ms", "-embeddings-url", "http://ollama:11434"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.NATS.URL != "nats://example:4222" || c.NATS.User != "picker" || c.NATS.Password != "secret" ||
		c.Ops.Addr != ":9191" || c.Ops.LogLevel != zerolog.DebugLevel || c.StreamReplicas != 3 || c.Timeout != 150*time.Millisecond ||
		c.EmbeddingsURL != "http://ollama:11434" || c.EmbeddingsAPIKey != "sk-x" || len(c.Ops.Deprecated) != 0 {
		t.Errorf("config %+v", c)
	}
}

// The picker's older names of the ops address still work, below the new ones, with a
// deprecation warning.
func TestParseOldOpsAddressNames(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		addr       string
		deprecated string
	}{
		{"old flag", nil, []string{"-http", ":9191"}, ":9191", "-http is deprecated"},
		{"old flag, empty: off as before", nil, []string{"-http", ""}, "", "-http is deprecated"},
		{"old variable", map[string]string{"TOOLFLEET_PICKER_HTTP": ":9292"}, nil, ":9292", "TOOLFLEET_PICKER_HTTP is deprecated"},
		{"new variable first", map[string]string{"TOOLFLEET_PICKER_HTTP": ":9292", "TOOLFLEET_OPS_ADDR": ":9393"}, nil, ":9393", ""},
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
			got := strings.Join(c.Ops.Deprecated, "; ")
			if c.Ops.Addr != tt.addr || (tt.deprecated == "") != (got == "") || !strings.Contains(got, tt.deprecated) {
				t.Errorf("addr %q, warnings %q; want %q and %q", c.Ops.Addr, got, tt.addr, tt.deprecated)
			}
		})
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
		{"replicas out of range", nil, []string{"-stream-replicas", "0"}, "-stream-replicas: must be 1 to 5, got 0"},
		{"malformed replicas variable", map[string]string{"TOOLFLEET_STREAM_REPLICAS": "three"}, nil, `TOOLFLEET_STREAM_REPLICAS="three"`},
		{"negative timeout", nil, []string{"-timeout", "-1s"}, "-timeout: must not be negative"},
		{"malformed timeout variable", map[string]string{"TOOLFLEET_PICKER_TIMEOUT": "soon"}, nil, `TOOLFLEET_PICKER_TIMEOUT="soon"`},
		{"TLS certificate without its key", nil, []string{"-nats-tls-cert", "only-cert.pem"}, "nats: give both a TLS certificate and its key"},
		{"bad old address variable", map[string]string{"TOOLFLEET_PICKER_HTTP": "9090"}, nil, `TOOLFLEET_PICKER_HTTP "9090"`},
		{"bad log level", nil, []string{"-log-level", "chatty"}, `-log-level "chatty"`},
		{"unknown flag", nil, []string{"-no-such-flag"}, "flag provided but not defined"},
		{"stray argument", nil, []string{"serve"}, "unexpected arguments"},
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
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "TOOLFLEET_OPS_ADDR") || !strings.Contains(out.String(), "deprecated: use -ops-addr") {
		t.Fatalf("Parse -h = %v, usage %q", err, out.String())
	}
}
