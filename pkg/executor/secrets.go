package executor

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ErrMissingSecret is wrapped by the error [New] returns when a secret a tool declares
// cannot be read: its variable is unset or empty, or its file unreadable or empty.
var ErrMissingSecret = errors.New("executor: missing secret")

// resolveSecrets reads the secrets every tool of reg declares, once, at start-up. Every
// problem is reported at once, each naming the tool, the secret and its source, never a
// value.
func resolveSecrets(reg *tools.Registry) (map[string]tools.Secrets, error) {
	out := make(map[string]tools.Secrets)
	var errs []error
	for _, d := range reg.Definitions() {
		for _, s := range d.Secrets {
			if _, dup := out[d.Name][s.Name]; dup {
				errs = append(errs, fmt.Errorf("%w: tool %s declares secret %s twice", ErrInvalidOption, d.Name, s.Name))
				continue
			}
			v, err := s.Resolve()
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: tool %s: %w", ErrMissingSecret, d.Name, err))
				continue
			}
			if out[d.Name] == nil {
				out[d.Name] = make(tools.Secrets)
			}
			out[d.Name][s.Name] = v
		}
	}
	return out, errors.Join(errs...)
}

// scrubSecrets replaces the tool's secret values in the output and in the failure's
// message, violations and cause, before anything is published, logged or traced. An output
// that is no longer JSON after the replacement (a secret that was a bare number, say)
// becomes a JSON string of the scrubbed text.
func scrubSecrets(j *job, secrets tools.Secrets, failure *tools.Error) *tools.Error {
	if len(secrets) == 0 {
		return failure
	}
	if out := secrets.Scrub(j.res.Output); string(out) != string(j.res.Output) {
		if !json.Valid(out) {
			out, _ = json.Marshal(string(out)) // a string always marshals
		}
		j.res.Output = out
	}
	if failure == nil {
		return failure
	}
	f := *failure
	f.Message = secrets.ScrubString(f.Message)
	if len(f.Violations) > 0 {
		f.Violations = make([]tools.Violation, len(failure.Violations))
		for i, v := range failure.Violations {
			f.Violations[i] = tools.Violation{Pointer: secrets.ScrubString(v.Pointer), Message: secrets.ScrubString(v.Message)}
		}
	}
	if f.Err != nil {
		if msg := f.Err.Error(); secrets.ScrubString(msg) != msg {
			f.Err = errors.New(secrets.ScrubString(msg))
		}
	}
	return &f
}
