// Package apiauth decides who calls toolfleet's HTTP endpoints (the planner's API, the
// MCP edge) and as whom: bearer tokens map to the identity (tenant and role) the caller
// acts with, the same identity NATS permissions give a tenant's users (events.Identity).
package apiauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Auth says who may use an HTTP API and as whom. With neither field set the API is
// open and every caller is anonymous (the zero identity): for a laptop or a single-tenant
// install behind its own gateway. Otherwise every request but the probes needs
// "Authorization: Bearer <token>", and the token decides the caller's identity: the runs
// it starts carry it (their calls are published on its call subjects, see
// events.Identity), and it sees, follows and answers approvals of its tenant's runs
// only; another tenant's run is "not found".
type Auth struct {
	// Token is a bearer token whose holder acts anonymously (no tenant, no role).
	Token string
	// Tokens maps the SHA-256 of a bearer token (hex) to the identity its holder acts
	// with. Build it with [LoadTokens] or [HashToken].
	Tokens map[string]events.Identity
}

// HashToken is the key of token in Auth.Tokens.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenEntry is one line of a tokens file: a token (or its SHA-256, so the file need
// not hold it) and the identity of its holder.
type TokenEntry struct {
	Token  string `json:"token,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Tenant string `json:"tenant"`
	Role   string `json:"role"`
}

// LoadTokens reads a tokens file: a JSON array of [TokenEntry], e.g.
//
//	[{"token": "s3cret", "tenant": "acme", "role": "admin"},
//	 {"sha256": "9f86d0…", "tenant": "globex", "role": "user"}]
//
// Every entry needs a tenant and a role (valid subject tokens); a token may appear once.
func LoadTokens(path string) (map[string]events.Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	var entries []TokenEntry
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("tokens file %s: want a JSON array of {token|sha256, tenant, role}: %w", path, err)
	}
	out := make(map[string]events.Identity, len(entries))
	for i, e := range entries {
		id := events.Identity{Tenant: e.Tenant, Role: e.Role}
		if id.Tenant == "" || id.Role == "" {
			return nil, fmt.Errorf("tokens file %s: entry %d needs a tenant and a role", path, i)
		}
		if err := id.Validate(); err != nil {
			return nil, fmt.Errorf("tokens file %s: entry %d: %w", path, i, err)
		}
		var key string
		switch {
		case e.Token != "" && e.SHA256 == "":
			key = HashToken(e.Token)
		case e.SHA256 != "" && e.Token == "":
			key = strings.ToLower(e.SHA256)
			if raw, err := hex.DecodeString(key); err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("tokens file %s: entry %d: sha256 must be 64 hex digits", path, i)
			}
		default:
			return nil, fmt.Errorf("tokens file %s: entry %d needs exactly one of token and sha256", path, i)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("tokens file %s: entry %d repeats a token", path, i)
		}
		out[key] = id
	}
	return out, nil
}

// Open reports whether the API takes requests without a token.
func (a Auth) Open() bool { return a.Token == "" && len(a.Tokens) == 0 }

// Identify returns the identity of the request's bearer token; ok is false for a
// request without a known token.
func (a Auth) Identify(r *http.Request) (events.Identity, bool) {
	if a.Open() {
		return events.Identity{}, true
	}
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || token == "" {
		return events.Identity{}, false
	}
	if a.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.Token)) == 1 {
		return events.Identity{}, true
	}
	// A map look-up by the token's hash: what it leaks in time is about the hash, which
	// tells nothing about a token.
	id, ok := a.Tokens[HashToken(token)]
	return id, ok
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller's identity.
func WithCaller(ctx context.Context, id events.Identity) context.Context {
	return context.WithValue(ctx, callerKey{}, id)
}

// Caller returns the identity in ctx (the zero identity when there is none).
func Caller(ctx context.Context) events.Identity {
	id, _ := ctx.Value(callerKey{}).(events.Identity)
	return id
}

// Middleware lets through requests with a known token (all of them when the API is
// open), with the caller's identity in their context ([Caller]), and answers the others
// 401 with reject.
func (a Auth) Middleware(next http.Handler, reject func(w http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := a.Identify(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolfleet"`)
			reject(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), id)))
	})
}
