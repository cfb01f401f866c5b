package pickercli

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

func TestParse(t *testing.T) {
	c := opstest.Defaults(t, Parse)
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
	c, err := Parse([]string{"-timeout", "150ms", "-embeddings-url", "http://ollama:11434"}, io.Discard)
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
// deprecation warning (internal/ops tests the precedence).
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
			opstest.Env(t, tt.env)
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
	opstest.Refuses(t, Parse, []opstest.Refusal{
		{Name: "replicas out of range", Args: []string{"-stream-replicas", "0"}, Says: "-stream-replicas (TOOLFLEET_STREAM_REPLICAS): must be 1 to 5, got 0"},
		{Name: "malformed replicas variable", Env: map[string]string{"TOOLFLEET_STREAM_REPLICAS": "three"}, Says: `TOOLFLEET_STREAM_REPLICAS="three"`},
		{Name: "negative timeout", Args: []string{"-timeout", "-1s"}, Says: "-timeout (TOOLFLEET_PICKER_TIMEOUT): must not be negative"},
		{Name: "malformed timeout variable", Env: map[string]string{"TOOLFLEET_PICKER_TIMEOUT": "soon"}, Says: `TOOLFLEET_PICKER_TIMEOUT="soon"`},
		{Name: "TLS certificate without its key", Args: []string{"-nats-tls-cert", "only-cert.pem"}, Says: "nats: give both a TLS certificate and its key"},
		{Name: "bad old address variable", Env: map[string]string{"TOOLFLEET_PICKER_HTTP": "9090"}, Says: `TOOLFLEET_PICKER_HTTP "9090"`},
		{Name: "bad log level", Args: []string{"-log-level", "chatty"}, Says: `-log-level "chatty"`},
		{Name: "unknown flag", Args: []string{"-no-such-flag"}, Says: "flag provided but not defined"},
		{Name: "stray argument", Args: []string{"serve"}, Says: "unexpected arguments"},
	})
}

func TestParseHelp(t *testing.T) {
	opstest.Help(t, Parse, "TOOLFLEET_OPS_ADDR", "deprecated: use -ops-addr")
}
