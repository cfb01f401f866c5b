package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
)

// SecretNamePattern is the rule for secret names: an environment variable name, since a
// command tool receives each secret as a variable of that name.
var SecretNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SecretEnvPrefix names the variable a secret is read from when its declaration gives no
// source: the secret API_KEY is read from TOOLFLEET_SECRET_API_KEY.
const SecretEnvPrefix = "TOOLFLEET_SECRET_"

// Secret declares a value a tool needs at run time that must never travel with calls,
// results, events or logs: an API key, a token, a password. The executor resolves it when
// it starts, from the environment variable Env or the file File (at most one is set;
// neither means the variable [SecretEnvPrefix]+Name), and hands it to the tool through
// the context (see [SecretFrom]).
//
// Only Name is marshalled to JSON: the catalog, and so the model, sees which secrets a
// tool uses, never where they come from. Env and File are read from JSON (a tools file),
// and set in Go.
type Secret struct {
	Name string
	Env  string
	File string
}

// MarshalJSON writes {"name": ...} and nothing of the source.
func (s Secret) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name string `json:"name"`
	}{s.Name})
}

// UnmarshalJSON reads {"name": ..., "env": ...} or {"name": ..., "file": ...}; any other
// field is an error, so that a misspelt source is not silently ignored.
func (s *Secret) UnmarshalJSON(b []byte) error {
	var v struct {
		Name string `json:"name"`
		Env  string `json:"env,omitempty"`
		File string `json:"file,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	*s = Secret{Name: v.Name, Env: v.Env, File: v.File}
	return nil
}

// Check reports what is wrong with the declaration, without reading the source.
func (s Secret) Check() error {
	if !SecretNamePattern.MatchString(s.Name) {
		return fmt.Errorf("secret name %q must match %s", s.Name, SecretNamePattern)
	}
	if s.Env != "" && s.File != "" {
		return fmt.Errorf("secret %s: give env or file, not both", s.Name)
	}
	return nil
}

// Resolve reads the secret's value from its source. A source that is unset, unreadable
// or empty is an error naming the secret and the source, never the value.
func (s Secret) Resolve() (string, error) {
	if err := s.Check(); err != nil {
		return "", err
	}
	if s.File != "" {
		b, err := os.ReadFile(s.File)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is in the message already
			}
			return "", fmt.Errorf("secret %s: read file %s: %w", s.Name, s.File, err)
		}
		// Files from Kubernetes Secrets or editors often end in a newline.
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret %s: file %s is empty", s.Name, s.File)
		}
		return v, nil
	}
	env := s.Env
	if env == "" {
		env = SecretEnvPrefix + s.Name
	}
	v, ok := os.LookupEnv(env)
	if !ok {
		return "", fmt.Errorf("secret %s: environment variable %s is not set", s.Name, env)
	}
	if v == "" {
		return "", fmt.Errorf("secret %s: environment variable %s is empty", s.Name, env)
	}
	return v, nil
}

// Secrets are resolved secret values by name. The executor puts a tool's own secrets in
// the context of each run; read them with [SecretFrom] or [MustSecret].
type Secrets map[string]string

type secretsKey struct{}

// WithSecrets returns a context carrying s.
func WithSecrets(ctx context.Context, s Secrets) context.Context {
	return context.WithValue(ctx, secretsKey{}, s)
}

// SecretFrom returns the value of the secret name the tool declared, if ctx has it.
func SecretFrom(ctx context.Context, name string) (string, bool) {
	s, _ := ctx.Value(secretsKey{}).(Secrets)
	v, ok := s[name]
	return v, ok
}

// MustSecret returns the value of the secret name, and panics when ctx does not have it:
// the tool did not declare it, or it is not running under an executor. The executor turns
// the panic into an internal error for the call.
func MustSecret(ctx context.Context, name string) string {
	v, ok := SecretFrom(ctx, name)
	if !ok {
		panic(fmt.Sprintf("tools: secret %q is not in the context; declare it in the tool's Definition.Secrets", name))
	}
	return v
}

// Scrub replaces every secret value in b with "[redacted:NAME]". Besides the value as it
// is, it replaces the forms a value commonly takes on its way out: JSON-escaped (in a
// JSON string), standard and URL base64 (padded or not) and URL query-escaped. A value
// embedded in a longer base64 text at an offset not divisible by 3, or transformed in
// other ways (hashed, split, reversed), is not found. Longer values are replaced first, so
// a secret containing another is redacted whole. A very short value (a PIN) is replaced
// wherever its bytes occur, in unrelated text too.
func (s Secrets) Scrub(b []byte) []byte {
	if len(s) == 0 {
		return b
	}
	for _, f := range s.forms() {
		if bytes.Contains(b, f.form) {
			b = bytes.ReplaceAll(b, f.form, []byte("[redacted:"+f.name+"]"))
		}
	}
	return b
}

// ScrubString is [Secrets.Scrub] for a string.
func (s Secrets) ScrubString(v string) string {
	if len(s) == 0 {
		return v
	}
	return string(s.Scrub([]byte(v)))
}

type secretForm struct {
	name string
	form []byte
}

func (s Secrets) forms() []secretForm {
	var out []secretForm
	for name, v := range s {
		if v == "" {
			continue
		}
		seen := map[string]bool{}
		for _, f := range []string{v, jsonEscaped(v), base64.StdEncoding.EncodeToString([]byte(v)),
			base64.RawStdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)),
			base64.RawURLEncoding.EncodeToString([]byte(v)), url.QueryEscape(v), url.PathEscape(v)} {
			if !seen[f] {
				seen[f] = true
				out = append(out, secretForm{name, []byte(f)})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].form) > len(out[j].form) })
	return out
}

func jsonEscaped(v string) string {
	b, _ := json.Marshal(v) // a string always marshals (invalid UTF-8 becomes U+FFFD)
	return string(b[1 : len(b)-1])
}
