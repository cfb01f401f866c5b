package executor_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// secretFile writes value to a file, as a mounted Kubernetes Secret would be.
func secretFile(t *testing.T, value string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var noArgs = json.RawMessage(`{"type":"object","additionalProperties":false}`)

// TestSecretsStayOutOfEvents runs a Go tool that returns its secret, one that fails with
// it, and a command tool that prints it, and looks for the value (and its base64 form) in
// the stored results, the executor's logs at debug level and the catalog.
func TestSecretsStayOutOfEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const value = "s3cr3t-value-7f2a"
	src := secretFile(t, value)
	secrets := []tools.Secret{{Name: "API_KEY", File: src}}

	reg := tools.NewRegistry()
	err := reg.AddFunc(tools.Definition{Name: "leaky", Parameters: noArgs, Safe: true, Secrets: secrets},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			v := tools.MustSecret(ctx, "API_KEY")
			return map[string]string{"key": v, "b64": base64.StdEncoding.EncodeToString([]byte(v))}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	err = reg.AddFunc(tools.Definition{Name: "leaky_error", Parameters: noArgs, Safe: true, Secrets: secrets,
		Retry: &tools.RetryPolicy{MaxRetries: new(0)}},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			return nil, errors.New("upstream refused key " + tools.MustSecret(ctx, "API_KEY"))
		})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "echo-secret")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '{\"key\":\"%s\"}' \"$API_KEY\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = toolsfile.Register(reg, []toolsfile.Spec{{
		Definition: tools.Definition{Name: "leaky_command", Parameters: noArgs, Safe: true, Secrets: secrets},
		Command:    &toolsfile.Command{Argv: []string{script}},
	}})
	if err != nil {
		t.Fatal(err)
	}

	logs := &opstest.Log{}
	b.start(t, reg, executor.WithLogger(zerolog.New(logs).Level(zerolog.DebugLevel)))
	for _, tool := range []string{"leaky", "leaky_error", "leaky_command"} {
		b.waitServed(t, tool)
		b.call(t, tool, "call-"+tool, "run-secrets", `{}`)
	}
	res := b.results.wait(t, 15*time.Second, "call-leaky", "call-leaky_error", "call-leaky_command")

	forms := []string{value, base64.StdEncoding.EncodeToString([]byte(value))}
	noValue := func(where, s string) {
		t.Helper()
		for _, f := range forms {
			if strings.Contains(s, f) {
				t.Errorf("%s contains the secret (%q): %s", where, f, s)
			}
		}
	}
	for id, r := range res {
		if !strings.Contains(string(r.Output), "[redacted:API_KEY]") {
			t.Errorf("%s: output %s, want the secret redacted", id, r.Output)
		}
		b.results.mu.Lock()
		raw := b.results.raw[id][0]
		b.results.mu.Unlock()
		noValue("stored result of "+id, string(raw.Data)+" "+strings.Join(headerValues(raw.Header), " "))
	}
	if r := res["call-leaky_error"]; r.Error == nil || !strings.Contains(r.Error.Message, "[redacted:API_KEY]") {
		t.Errorf("leaky_error: error %+v, want its message with the secret redacted", r.Error)
	}
	noValue("executor logs", logs.String())
	if !strings.Contains(logs.String(), "call answered") {
		t.Errorf("logs hold no \"call answered\" line; were they captured? %s", logs.String())
	}

	kv, err := b.js.KeyValue(context.Background(), events.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"leaky", "leaky_command"} {
		e, err := kv.Get(context.Background(), tool)
		if err != nil {
			t.Fatalf("catalog entry %s: %v", tool, err)
		}
		noValue("catalog entry "+tool, string(e.Value()))
		if strings.Contains(string(e.Value()), src) || !strings.Contains(string(e.Value()), `"secrets":[{"name":"API_KEY"}]`) {
			t.Errorf("catalog entry %s: %s, want the secret's name and not its source", tool, e.Value())
		}
	}
}

func headerValues(h map[string][]string) []string {
	var out []string
	for _, vs := range h {
		out = append(out, vs...)
	}
	return out
}

// TestMissingSecretFailsStart checks that New refuses a registry whose tool declares a
// secret that cannot be read, naming the tool, the secret and its source.
func TestMissingSecretFailsStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name   string
		secret tools.Secret
		want   []string
	}{
		{name: "env", secret: tools.Secret{Name: "API_KEY", Env: "TOOLFLEET_TEST_UNSET_VARIABLE"},
			want: []string{"API_KEY", "TOOLFLEET_TEST_UNSET_VARIABLE", "not set"}},
		{name: "default env", secret: tools.Secret{Name: "OTHER_KEY"},
			want: []string{"OTHER_KEY", "TOOLFLEET_SECRET_OTHER_KEY"}},
		{name: "file", secret: tools.Secret{Name: "DB_PASSWORD", File: filepath.Join(t.TempDir(), "absent")},
			want: []string{"DB_PASSWORD", "absent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := tools.NewRegistry()
			err := reg.AddFunc(tools.Definition{Name: "needs_secret", Parameters: noArgs, Safe: true, Secrets: []tools.Secret{tt.secret}},
				func(context.Context, json.RawMessage) (any, error) { return nil, nil })
			if err != nil {
				t.Fatal(err)
			}
			_, err = executor.New(b.nc, reg)
			if !errors.Is(err, executor.ErrMissingSecret) {
				t.Fatalf("New: %v, want ErrMissingSecret", err)
			}
			for _, w := range append(tt.want, "needs_secret") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: %v, want it to name %q", err, w)
				}
			}
		})
	}
}
