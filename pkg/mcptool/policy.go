package mcptool

import (
	"fmt"
	"slices"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Override sets what toolfleet allows an imported tool; a field left unset keeps the
// server's default ([Policy].Defaults), and that the built-in one (unsafe, not
// idempotent, no roles, the executor's timeout, the default retry policy).
type Override struct {
	// Name is the toolfleet name of the tool, instead of prefix_name. It must match
	// [tools.NamePattern]. Only meaningful for one tool, not in Defaults.
	Name string `json:"name,omitempty"`
	// Safe lets the tool run without approval.
	Safe *bool `json:"safe,omitempty"`
	// Idempotent lets the fleet run the tool again for the same call id (retries,
	// redelivery after a crash).
	Idempotent *bool `json:"idempotent,omitempty"`
	// Final ends the planner's run after the tool's successful result.
	Final *bool `json:"final,omitempty"`
	// Roles are the caller roles allowed to call the tool; empty: any.
	Roles []string `json:"roles,omitempty"`
	// Tenants are the tenants allowed to call the tool; empty: any (see
	// tools.Definition.Tenants).
	Tenants []string `json:"tenants,omitempty"`
	// Timeout bounds one attempt; zero: the executor's default.
	Timeout tools.Duration `json:"timeout,omitempty"`
	// Retry is the retry policy (only an idempotent tool is retried).
	Retry *tools.RetryPolicy `json:"retry,omitempty"`
	// Tags and Capabilities are added to the tool's ("mcp" and the server's name are
	// always there).
	Tags         []string `json:"tags,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// Policy is what toolfleet allows the tools of one server.
type Policy struct {
	// Defaults apply to every tool of the server.
	Defaults Override `json:"defaults"`
	// Tools override Defaults per tool, by the server's name of the tool.
	Tools map[string]Override `json:"tools,omitempty"`
	// Include, when not empty, imports only these tools (the server's names).
	Include []string `json:"include,omitempty"`
	// Exclude leaves these tools out (the server's names).
	Exclude []string `json:"exclude,omitempty"`
}

// Check reports what is wrong with the policy itself: a name in Defaults, a bad name or
// a negative timeout in an override.
func (p Policy) Check() []string {
	var out []string
	if p.Defaults.Name != "" {
		out = append(out, "defaults: name is per tool; set it under tools")
	}
	if p.Defaults.Timeout < 0 {
		out = append(out, "defaults: timeout cannot be negative")
	}
	for _, k := range sortedKeys(p.Tools) {
		o := p.Tools[k]
		if o.Name != "" && !tools.NamePattern.MatchString(o.Name) {
			out = append(out, fmt.Sprintf("tools: %s: name %q must match %s", k, o.Name, tools.NamePattern))
		}
		if o.Timeout < 0 {
			out = append(out, fmt.Sprintf("tools: %s: timeout cannot be negative", k))
		}
	}
	return out
}

// imports reports whether the server's tool called name is imported at all.
func (p Policy) imports(name string) bool {
	if len(p.Include) > 0 && !slices.Contains(p.Include, name) {
		return false
	}
	return !slices.Contains(p.Exclude, name)
}

// apply sets d's policy fields for the server's tool called name.
func (p Policy) apply(d *tools.Definition, name string) {
	for _, o := range []Override{p.Defaults, p.Tools[name]} {
		if o.Safe != nil {
			d.Safe = *o.Safe
		}
		if o.Idempotent != nil {
			d.Idempotent = new(*o.Idempotent)
		}
		if o.Final != nil {
			d.Final = *o.Final
		}
		if o.Roles != nil {
			d.Roles = slices.Clone(o.Roles)
		}
		if o.Tenants != nil {
			d.Tenants = slices.Clone(o.Tenants)
		}
		if o.Timeout > 0 {
			d.Timeout = o.Timeout
		}
		if o.Retry != nil {
			r := *o.Retry
			d.Retry = &r
		}
		d.Tags = appendNew(d.Tags, o.Tags...)
		d.Capabilities = appendNew(d.Capabilities, o.Capabilities...)
	}
}

func appendNew(dst []string, add ...string) []string {
	for _, s := range add {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
