package tools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestSecretMarshalsOnlyItsName(t *testing.T) {
	t.Parallel()
	d := tools.Definition{Name: "t", Secrets: []tools.Secret{{Name: "API_KEY", Env: "SOME_VAR"}, {Name: "DB", File: "/var/run/secrets/db"}}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"secrets":[{"name":"API_KEY"},{"name":"DB"}]`) || strings.Contains(string(b), "SOME_VAR") || strings.Contains(string(b), "/var/run") {
		t.Errorf("marshalled %s, want the secrets' names only", b)
	}
	var back tools.Definition
	if err := json.Unmarshal([]byte(`{"name":"t","secrets":[{"name":"A","env":"V"},{"name":"B","file":"/f"}]}`), &back); err != nil {
		t.Fatal(err)
	}
	if want := []tools.Secret{{Name: "A", Env: "V"}, {Name: "B", File: "/f"}}; len(back.Secrets) != 2 || back.Secrets[0] != want[0] || back.Secrets[1] != want[1] {
		t.Errorf("unmarshalled %+v, want %+v", back.Secrets, want)
	}
	if err := json.Unmarshal([]byte(`{"name":"t","secrets":[{"name":"A","envv":"V"}]}`), &back); err == nil {
		t.Error("a misspelt source was accepted")
	}
}

func TestSecretResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "key")
	if err := os.WriteFile(p, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := (tools.Secret{Name: "K", File: p}).Resolve(); err != nil || v != "from-file" {
		t.Errorf("Resolve from file: %q, %v; want from-file", v, err)
	}
	tests := []struct {
		name   string
		secret tools.Secret
		want   string
	}{
		{"bad name", tools.Secret{Name: "A-B"}, "secret name"},
		{"two sources", tools.Secret{Name: "A", Env: "X", File: p}, "not both"},
		{"unset", tools.Secret{Name: "TOOLFLEET_TEST_NEVER_SET"}, "TOOLFLEET_SECRET_TOOLFLEET_TEST_NEVER_SET is not set"},
		{"no file", tools.Secret{Name: "A", File: filepath.Join(dir, "none")}, "secret A: read file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.secret.Resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resolve: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestSecretsScrub(t *testing.T) {
	t.Parallel()
	v := `p@ss/word+"x"?`
	s := tools.Secrets{"PW": v, "EMPTY": ""}
	in := strings.Join([]string{v, mustJSON(t, v), base64.StdEncoding.EncodeToString([]byte(v)),
		base64.RawURLEncoding.EncodeToString([]byte(v)), "p%40ss%2Fword%2B%22x%22%3F", "untouched"}, " | ")
	got := s.ScrubString(in)
	if strings.Contains(got, "p@ss") || strings.Contains(got, base64.StdEncoding.EncodeToString([]byte(v))[:8]) || strings.Contains(got, "p%40ss") {
		t.Errorf("Scrub(%q) = %q, still holds a form of the secret", in, got)
	}
	if strings.Count(got, "[redacted:PW]") != 5 || !strings.HasSuffix(got, "untouched") {
		t.Errorf("Scrub(%q) = %q, want five redactions and the rest untouched", in, got)
	}
}

func TestSecretFromContext(t *testing.T) {
	t.Parallel()
	ctx := tools.WithSecrets(context.Background(), tools.Secrets{"K": "v"})
	if v, ok := tools.SecretFrom(ctx, "K"); !ok || v != "v" {
		t.Errorf("SecretFrom = %q, %v", v, ok)
	}
	if _, ok := tools.SecretFrom(context.Background(), "K"); ok {
		t.Error("SecretFrom found a secret in an empty context")
	}
	defer func() {
		if recover() == nil {
			t.Error("MustSecret of an undeclared secret did not panic")
		}
	}()
	tools.MustSecret(ctx, "OTHER")
}

func mustJSON(t *testing.T, v string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[1 : len(b)-1])
}
