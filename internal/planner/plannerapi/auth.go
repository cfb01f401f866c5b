package plannerapi

import (
	"net/http"

	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Auth says who may use the planner's API and as whom (see apiauth.Auth): a caller
// sees only its tenant's runs.
type Auth = apiauth.Auth

// LoadTokens reads a tokens file (see apiauth.LoadTokens): a token's holder acts with
// the tenant and role the file gives it.
func LoadTokens(path string) (map[string]events.Identity, error) { return apiauth.LoadTokens(path) }

// HashToken is the key of a token in Auth.Tokens (see apiauth.HashToken).
func HashToken(token string) string { return apiauth.HashToken(token) }

// callerOf returns the identity the API established for the request.
func callerOf(r *http.Request) events.Identity { return apiauth.Caller(r.Context()) }
