package plannercli

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

func TestParse(t *testing.T) {
	c := opstest.Defaults(t, Parse)
	if c.HTTPAddr != DefaultHTTPAddr || c.StreamReplicas != 1 || !c.UsePicker || c.Token != "" ||
		c.Ops.Addr != ops.DefaultAddr || c.Ops.LogLevel != zerolog.InfoLevel || c.NATS.URL != "nats://127.0.0.1:4222" ||
		c.MaxStarting != 256 || c.MaxStall != time.Second || c.StepLease != 3*time.Second {
		t.Fatalf("defaults %+v", c)
	}

	t.Setenv("TOOLFLEET_HTTP_ADDR", "127.0.0.1:9999")
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "3")
	t.Setenv("TOOLFLEET_API_TOKEN", "s3cret")
	t.Setenv("TOOLFLEET_OPS_ADDR", ":9191")
	t.Setenv("TOOLFLEET_LOG_LEVEL", "warn")
	t.Setenv("TOOLFLEET_NATS_URL", "nats://nats:4222")
	t.Setenv("TOOLFLEET_OPERATOR_ROLES", "ops, oncall")
	t.Setenv("TOOLFLEET_MAX_STALL", "250ms")
	c, err := Parse([]string{"-script", "a=a.yaml", "-script", "b=b.yaml", "-picker=false", "-log-level", "debug", "-max-starting", "64", "-step-lease", "5s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9999" || c.StreamReplicas != 3 || c.Token != "s3cret" || c.UsePicker ||
		!slices.Equal(c.Scripts, []string{"a=a.yaml", "b=b.yaml"}) || c.Ops.Addr != ":9191" ||
		c.Ops.LogLevel != zerolog.DebugLevel || c.NATS.URL != "nats://nats:4222" || !slices.Equal(c.OperatorRoles, []string{"ops", "oncall"}) ||
		c.MaxStarting != 64 || c.MaxStall != 250*time.Millisecond || c.StepLease != 5*time.Second {
		t.Fatalf("config %+v", c)
	}
	if c, err = Parse([]string{"-model-roles", "big=admin|ops", "-model-roles", "huge=admin"}, io.Discard); err != nil ||
		!slices.Equal(c.ModelRoles["big"], []string{"admin", "ops"}) || !slices.Equal(c.ModelRoles["huge"], []string{"admin"}) {
		t.Fatalf("-model-roles: %v, %v", c.ModelRoles, err)
	}
	if c, err = Parse([]string{"-operator-roles", "admin"}, io.Discard); err != nil || !slices.Equal(c.OperatorRoles, []string{"admin"}) {
		t.Fatalf("-operator-roles admin: %v, %v", c.OperatorRoles, err)
	}
}

// Every error names the setting it is about.
func TestParseRefuses(t *testing.T) {
	opstest.Refuses(t, Parse, []opstest.Refusal{
		{Name: "malformed replicas variable", Env: map[string]string{"TOOLFLEET_STREAM_REPLICAS": "three"}, Says: `TOOLFLEET_STREAM_REPLICAS="three"`},
		{Name: "replicas out of range", Args: []string{"-stream-replicas", "7"}, Says: "-stream-replicas (TOOLFLEET_STREAM_REPLICAS): must be 1 to 5, got 7"},
		{Name: "script without a name", Args: []string{"-script", "demo.yaml"}, Says: `-script: want name=path, got "demo.yaml"`},
		{Name: "bad ops address", Args: []string{"-ops-addr", "9090"}, Says: `-ops-addr "9090"`},
		{Name: "bad log level", Env: map[string]string{"TOOLFLEET_LOG_LEVEL": "loud"}, Says: `TOOLFLEET_LOG_LEVEL "loud"`},
		{Name: "TLS certificate without its key", Args: []string{"-nats-tls-cert", "cert.pem"}, Says: "nats: give both a TLS certificate and its key"},
		{Name: "operator role with a dot", Args: []string{"-operator-roles", "ops,a.b"}, Says: `-operator-roles (TOOLFLEET_OPERATOR_ROLES): invalid_event: role "a.b" is not allowed`},
		{Name: "model roles without roles", Args: []string{"-model-roles", "big"}, Says: `-model-roles (TOOLFLEET_MODEL_ROLES): want model=role|role, got "big"`},
		{Name: "no run may start", Args: []string{"-max-starting", "0"}, Says: "-max-starting (TOOLFLEET_MAX_STARTING): must be at least 1, got 0"},
		{Name: "no stall allowed", Env: map[string]string{"TOOLFLEET_MAX_STALL": "0s"}, Says: "-max-stall (TOOLFLEET_MAX_STALL): must be a positive duration, got 0s"},
		{Name: "step lease too short", Env: map[string]string{"TOOLFLEET_STEP_LEASE": "500ms"}, Says: "-step-lease (TOOLFLEET_STEP_LEASE): must be at least 1s, got 500ms"},
		{Name: "stray argument", Args: []string{"serve"}, Says: "unexpected arguments"},
		{Name: "an executor's old flag", Args: []string{"-metrics-addr", ":9090"}, Says: "flag provided but not defined: -metrics-addr"},
	})
}

func TestParseHelp(t *testing.T) {
	opstest.Help(t, Parse, "TOOLFLEET_OPS_ADDR", "TOOLFLEET_HTTP_ADDR")
}

func TestModels(t *testing.T) {
	opstest.Env(t, nil)
	t.Setenv("TOOLFLEET_MODEL", "")
	if _, _, err := (Config{}).Models(); err == nil || !strings.Contains(err.Error(), "no model: set TOOLFLEET_MODEL") {
		t.Errorf("no model: %v", err)
	}
	if _, _, err := (Config{Scripts: []string{"a=" + filepath.Join(t.TempDir(), "missing.yaml")}}).Models(); err == nil || !strings.Contains(err.Error(), "-script a=") {
		t.Errorf("a missing script: %v", err)
	}
}
