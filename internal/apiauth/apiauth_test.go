package apiauth

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/events"
)

func TestLoadTokensRefusesBadFiles(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"token":"x"}`, "JSON array"},
		{`[{"token":"x","tenant":"acme"}]`, "needs a tenant and a role"},
		{`[{"token":"x","tenant":"a.b","role":"r"}]`, "tenant"},
		{`[{"token":"x","sha256":"` + HashToken("x") + `","tenant":"a","role":"r"}]`, "exactly one of token and sha256"},
		{`[{"sha256":"abc","tenant":"a","role":"r"}]`, "64 hex digits"},
		{`[{"token":"x","tenant":"a","role":"r"},{"sha256":"` + HashToken("x") + `","tenant":"b","role":"r"}]`, "repeats a token"},
		{`[{"token":"x","tenant":"a","role":"r","extra":1}]`, "unknown field"},
	} {
		path := filepath.Join(t.TempDir(), "tokens.json")
		if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTokens(path); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.body, err, tt.want)
		}
	}
}

func TestIdentify(t *testing.T) {
	a := Auth{Token: "anon", Tokens: map[string]events.Identity{HashToken("acme-key"): {Tenant: "acme", Role: "admin"}}}
	for _, tt := range []struct {
		header string
		want   events.Identity
		ok     bool
	}{
		{"Bearer anon", events.Identity{}, true},
		{"Bearer acme-key", events.Identity{Tenant: "acme", Role: "admin"}, true},
		{"Bearer other", events.Identity{}, false},
		{"acme-key", events.Identity{}, false},
		{"", events.Identity{}, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		if got, ok := a.Identify(r); got != tt.want || ok != tt.ok {
			t.Errorf("%q: %+v %v, want %+v %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := (Auth{}).Identify(httptest.NewRequest("GET", "/", nil)); !ok {
		t.Error("an open API refused a request without a token")
	}
}
