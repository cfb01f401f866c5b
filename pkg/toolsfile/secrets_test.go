package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestLoadSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script(t, dir, "ok.sh", "cat")
	p := writeFile(t, dir, "tools.yaml", `
tools:
  - name: with_secrets
    parameters: {type: object}
    secrets:
      - {name: API_KEY, env: TOOLFLEET_SECRET_API_KEY}
      - {name: DB_PASSWORD, file: /var/run/secrets/toolfleet/db-password}
    command: {argv: [./ok.sh]}
`)
	specs, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []tools.Secret{{Name: "API_KEY", Env: "TOOLFLEET_SECRET_API_KEY"}, {Name: "DB_PASSWORD", File: "/var/run/secrets/toolfleet/db-password"}}
	if got := specs[0].Definition.Secrets; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("secrets %+v, want %+v", got, want)
	}
}

func TestLoadRefusesBadSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script(t, dir, "ok.sh", "cat")
	const head = "tools:\n  - {name: x, parameters: {type: object}, "
	tests := []struct {
		name, content, fragment string
	}{
		{"bad name", head + "secrets: [{name: 'API-KEY'}], command: {argv: [./ok.sh]}}", `secret name "API-KEY" must match`},
		{"two sources", head + "secrets: [{name: K, env: A, file: /b}], command: {argv: [./ok.sh]}}", "secret K: give env or file, not both"},
		{"unknown source", head + "secrets: [{name: K, vault: a}], command: {argv: [./ok.sh]}}", `unknown field "vault"`},
		{"declared twice", head + "secrets: [{name: K}, {name: K}], command: {argv: [./ok.sh]}}", "secret K is declared twice"},
		{"clashes with env", head + "secrets: [{name: K}], command: {argv: [./ok.sh], env: {K: v}}}", "secret K clashes"},
		{"undeclared in header", head + "http: {url: 'http://a', headers: {Authorization: 'Bearer ${secret:TOKEN}'}}}", "references ${secret:TOKEN}, which is not in the tool's secrets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml", tt.content))
			if !errors.Is(err, ErrInvalidFile) || !strings.Contains(err.Error(), tt.fragment) {
				t.Errorf("Load: %v, want ErrInvalidFile with %q", err, tt.fragment)
			}
		})
	}
}

func TestCommandGetsItsSecrets(t *testing.T) {
	t.Parallel()
	p := script(t, t.TempDir(), "key", `printf '{"key":"%s","other":"%s"}' "${API_KEY-unset}" "${OTHER-unset}"`)
	spec := commandSpec("with_secret", &Command{Argv: []string{p}})
	spec.Definition.Secrets = []tools.Secret{{Name: "API_KEY"}}
	ctx := tools.WithSecrets(context.Background(), tools.Secrets{"API_KEY": "k-123", "OTHER": "not declared"})
	out, err := spec.Run(ctx, json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := string(out.(json.RawMessage)); got != `{"key":"k-123","other":"unset"}` {
		t.Errorf("output %s, want the declared secret only", got)
	}
	_, err = spec.Run(context.Background(), json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeInvalidDefinition, "secret API_KEY is not available")
}

func TestHTTPHeaderFromSecret(t *testing.T) {
	t.Parallel()
	srv, s := endpoint(t)
	spec := httpSpec(&HTTP{URL: srv.URL + "/ok", Headers: map[string]string{"Authorization": "Bearer ${secret:API_KEY}"}})
	spec.Definition.Secrets = []tools.Secret{{Name: "API_KEY"}}
	// A value that looks like a reference is sent as it is, not expanded again.
	ctx := tools.WithSecrets(context.Background(), tools.Secrets{"API_KEY": "tok-456${HOME}"})
	if _, err := spec.Run(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	s.mu.Lock()
	got := s.headers.Get("Authorization")
	s.mu.Unlock()
	if got != "Bearer tok-456${HOME}" {
		t.Errorf("Authorization = %q, want the secret in its template", got)
	}
	_, err := spec.Run(context.Background(), json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeInvalidDefinition, "secret API_KEY is not available")
}
