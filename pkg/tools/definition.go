package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// NoSchemaMode says how far a tool registered without a schema may go. It is only
// meaningful together with [Definition.AllowNoSchema].
type NoSchemaMode string

const (
	// NoSchemaReadOnly runs the tool with unvalidated arguments, and is allowed only for a
	// tool that declares itself read-only: [CapabilityReadOnly] among its Capabilities.
	// Registering such a tool without it fails with invalid_definition.
	NoSchemaReadOnly NoSchemaMode = "read-only"
	// NoSchemaHumanApproval runs the tool only after an approval event answers the call.
	NoSchemaHumanApproval NoSchemaMode = "human-approval"
	// NoSchemaFull runs the tool with unvalidated arguments and no further gate.
	NoSchemaFull NoSchemaMode = "full"
)

// Valid reports whether m is one of the three modes.
func (m NoSchemaMode) Valid() bool {
	return m == NoSchemaReadOnly || m == NoSchemaHumanApproval || m == NoSchemaFull
}

// CapabilityReadOnly is the capability by which a tool declares that it has no side
// effects. A tool registered without a schema under [NoSchemaReadOnly] must declare it;
// callers may also require it (e.g. the picker's capability filter).
const CapabilityReadOnly = "read-only"

// NamePattern is the providers' rule for tool names. A valid name is also exactly one
// NATS subject token, so it can stand in toolfleet.call.<tool>.
var NamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Definition is the canonical description of a tool: what travels in the catalog, what
// providers are shown (after translation) and what calls are validated against. It
// marshals to and from JSON with exactly the field names below.
type Definition struct {
	// Type is always "function"; an empty Type is read as "function".
	Type string `json:"type"`
	// Name is the tool's stable identity; it must match [NamePattern].
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments, kept byte for byte as given. It is
	// the contract: every call is validated against it before the tool runs.
	Parameters json.RawMessage `json:"parameters,omitempty"`
	// Strict asks providers that support it (OpenAI) to constrain generation to the schema.
	Strict bool `json:"strict,omitempty"`
	// AllowNoSchema permits registering the tool without Parameters; NoSchemaMode must then
	// be set (read-only only with [CapabilityReadOnly] in Capabilities), and every call
	// reports validated:false and the mode.
	AllowNoSchema bool         `json:"allowNoSchema,omitempty"`
	NoSchemaMode  NoSchemaMode `json:"noSchemaMode,omitempty"`
	// Safe marks a tool that may run without approval and be offered by the picker by
	// default. The zero value is unsafe: safety is declared, never assumed.
	Safe bool `json:"safe"`
	// Idempotent says whether the fleet may run the tool again for the same call id (on a
	// retry or after a crash). Nil means true; set it to false (new(false)) for tools with side
	// effects that must not repeat.
	Idempotent *bool `json:"idempotent,omitempty"`
	// Final marks a tool whose successful result ends the planner's run.
	Final bool `json:"final,omitempty"`
	// Tags are free labels the picker can include or exclude.
	Tags []string `json:"tags,omitempty"`
	// Capabilities are features a caller may require, e.g. "streaming", or
	// [CapabilityReadOnly] ("read-only"), by which the tool declares it has no side effects.
	Capabilities []string `json:"capabilities,omitempty"`
	// Roles lists the caller roles allowed to see and call the tool; empty means any
	// role. Executors enforce it with the caller's identity as the fleet establishes it
	// (the call's subject, which NATS permissions guard; see pkg/events, "Identity"),
	// never with caller-supplied metadata: a call whose role is not listed, or that has
	// no role, is answered [CodeForbidden] and never runs.
	Roles []string `json:"roles,omitempty"`
	// Tenants lists the tenants allowed to see and call the tool; empty means every
	// tenant and anonymous callers. Enforced like Roles.
	Tenants []string `json:"tenants,omitempty"`
	// Timeout bounds one attempt of the tool; zero means the executor's default.
	Timeout Duration `json:"timeout,omitempty"`
	// Retry is the retry policy; nil means [DefaultRetryPolicy].
	Retry *RetryPolicy `json:"retry,omitempty"`
	// ResponseSchema, when set, is the JSON Schema the tool's final output must satisfy.
	ResponseSchema json.RawMessage `json:"responseSchema,omitempty"`
	// Secrets are the secrets the tool needs at run time. The executor resolves them at
	// start-up, hands them to the tool through the context ([SecretFrom]) and scrubs their
	// values from every output and error. Only their names are marshalled.
	Secrets []Secret `json:"secrets,omitempty"`
	// RateLimit caps how many calls of the tool start per second across the whole fleet
	// (every replica together); nil means no cap. See [RateLimit].
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// MaxInFlightPerTenant caps the calls of one tenant (anonymous callers count as one
	// tenant) running at once across the whole fleet, so that one tenant cannot take all
	// of the tool's capacity; 0 means no cap.
	MaxInFlightPerTenant int `json:"maxInFlightPerTenant,omitempty"`
	// LimitWait is how long a call over RateLimit or MaxInFlightPerTenant may wait for
	// its turn before it is answered [CodeRateLimited]; zero means 30s. The call's own
	// deadline, when earlier, wins.
	LimitWait Duration `json:"limitWait,omitempty"`
	// RunContext asks for the run context of each call ([RunContext]: the conversation so
	// far, the step, the run's metadata), which can be large and private, so a tool gets
	// it only when it asks: a Go tool in [CallInfo].Run, a command tool in the file named
	// by TOOLFLEET_RUN_CONTEXT, an HTTP tool in its request body (pkg/toolsfile).
	RunContext bool `json:"runContext,omitempty"`
	// Composite, on a composite tool, names the tools its calls call: its arguments are
	// {"calls":[{"name":TOOL,"args":{...}}, ...]} with each TOOL one of Composite.Tools.
	// [Registry.AddComposite] and [CompositeDefinition] (which a tools file's composite
	// entry uses) set it, and the catalog carries it, so that a planner can check each
	// sub-call of a run's call like a call of the model; a definition that sets it is
	// registered only as a composite (AddComposite, or with [WithCompositeEnvelope]).
	// Nil for any other tool.
	Composite *Composite `json:"composite,omitempty"`
}

// Composite lists the sub-tools of a composite tool ([Definition.Composite]): the same
// {"tools": [...]} a tools file's composite entry declares.
type Composite struct {
	Tools []string `json:"tools"`
}

// Has reports whether name is one of the composite's sub-tools; false on nil.
func (c *Composite) Has(name string) bool { return c != nil && slices.Contains(c.Tools, name) }

// check says what is wrong with the sub-tools of the composite self: none, a name that
// is not a tool name, itself, or a name listed twice.
func (c *Composite) check(self string) error {
	if len(c.Tools) == 0 {
		return Errorf(CodeInvalidDefinition, "composite %q: list at least one sub-tool", self)
	}
	seen := make(map[string]bool, len(c.Tools))
	for _, t := range c.Tools {
		switch {
		case !NamePattern.MatchString(t):
			return Errorf(CodeInvalidDefinition, "composite %q: sub-tool name %q must match %s", self, t, NamePattern)
		case t == self:
			return Errorf(CodeInvalidDefinition, "composite %q cannot contain itself", self)
		case seen[t]:
			return Errorf(CodeInvalidDefinition, "composite %q lists sub-tool %q twice", self, t)
		}
		seen[t] = true
	}
	return nil
}

// AllowsCaller reports whether a caller of tenant and role (empty for an anonymous
// caller) may call the tool: its tenant is listed in Tenants and its role in Roles, or
// the list is empty.
func (d Definition) AllowsCaller(tenant, role string) bool {
	return (len(d.Tenants) == 0 || tenant != "" && slices.Contains(d.Tenants, tenant)) &&
		(len(d.Roles) == 0 || role != "" && slices.Contains(d.Roles, role))
}

// forbiddenMessage says why a caller of tenant and role may not call d.
func forbiddenMessage(d Definition, tenant, role string) string {
	who := "an anonymous caller"
	if tenant != "" || role != "" {
		who = fmt.Sprintf("role %q of tenant %q", role, tenant)
	}
	return fmt.Sprintf("tool %q may not be called by %s (allowed roles %v, tenants %v)", d.Name, who, orAny(d.Roles), orAny(d.Tenants))
}

func orAny(list []string) any {
	if len(list) == 0 {
		return "any"
	}
	return list
}

// Forbidden returns the [CodeForbidden] error for a caller of tenant and role that d
// does not allow ([Definition.AllowsCaller]), or nil when it does.
func (d Definition) Forbidden(tenant, role string) *Error {
	if d.AllowsCaller(tenant, role) {
		return nil
	}
	return &Error{Code: CodeForbidden, Message: forbiddenMessage(d, tenant, role)}
}

// IsIdempotent reports whether the tool may run more than once for one call id.
func (d Definition) IsIdempotent() bool { return d.Idempotent == nil || *d.Idempotent }

// Validated reports whether calls of the tool are checked against a schema.
func (d Definition) Validated() bool { return len(d.Parameters) > 0 }

// ReadOnly reports whether the tool declares [CapabilityReadOnly] (in any letter case).
func (d Definition) ReadOnly() bool {
	return slices.ContainsFunc(d.Capabilities, func(c string) bool { return strings.EqualFold(c, CapabilityReadOnly) })
}

// NoSchema returns the tool's noSchemaMode when its calls are not validated against a
// schema, and "" when they are.
func (d Definition) NoSchema() NoSchemaMode {
	if d.Validated() {
		return ""
	}
	return d.NoSchemaMode
}

// NeedsApproval reports whether the definition alone makes a call wait for an approval
// (not Safe, or unvalidated under human-approval). Where the tool runs, a read-only tool
// its runner cannot confine waits too: see [Registry.ApprovalReason].
func (d Definition) NeedsApproval() bool {
	return !d.Safe || (!d.Validated() && d.NoSchemaMode == NoSchemaHumanApproval)
}

// EffectiveRetry returns the retry policy with defaults filled in.
func (d Definition) EffectiveRetry() RetryPolicy {
	if d.Retry == nil {
		return DefaultRetryPolicy()
	}
	return d.Retry.withDefaults()
}

// RetryPolicy says how a failed attempt is retried: exponential backoff from
// InitialBackoff, times Multiplier per attempt, capped at MaxBackoff, each delay varied by
// ±Jitter (a fraction). Zero fields take the defaults of [DefaultRetryPolicy], except
// that MaxRetries and Jitter are pointers so that an explicit 0 means "none".
type RetryPolicy struct {
	MaxRetries     *int     `json:"maxRetries,omitempty"`
	InitialBackoff Duration `json:"initialBackoff,omitempty"`
	MaxBackoff     Duration `json:"maxBackoff,omitempty"`
	Multiplier     float64  `json:"multiplier,omitempty"`
	Jitter         *float64 `json:"jitter,omitempty"`
	// RetryOn lists the error codes that are retried. Empty means [RetryableByDefault].
	// A code that is not [Code.Retryable] (invalid input, unknown tool, denial, output too
	// large, a code toolfleet does not know) is not retried even when listed; with When,
	// tool_error_permanent may be (see [RetryPolicy.ShouldRetryError]).
	RetryOn []Code `json:"retryOn,omitempty"`
	// When, if set, is a rule on the failed attempt's error: only a failure it matches is
	// retried.
	When *RetryWhen `json:"when,omitempty"`
}

// RetryWhen is a rule on a failed attempt's error. Every condition it sets must hold; a
// condition left empty holds for any error. A tools-file runner carries what the rule
// reads: a command's exit code, an HTTP endpoint's status ([HTTPStatusOf], [ExitCodeOf]).
type RetryWhen struct {
	// Message is an RE2 regular expression (package regexp) the error's message must
	// match somewhere; anchor it with ^ and $ to match it whole.
	Message string `json:"message,omitempty"`
	// HTTPStatus lists the statuses of an HTTP endpoint's answer that are retried; an
	// error without a status does not match.
	HTTPStatus []int `json:"httpStatus,omitempty"`
	// ExitCode lists the exit codes of a command that are retried; an error without an
	// exit code does not match.
	ExitCode []int `json:"exitCode,omitempty"`
}

// Check reports what is wrong with the rule: no condition, a message that is not an
// RE2 expression, a status outside 100-599.
func (w RetryWhen) Check() error {
	if w.Message == "" && len(w.HTTPStatus) == 0 && len(w.ExitCode) == 0 {
		return errors.New("retry.when sets no condition: give message, httpStatus and/or exitCode")
	}
	if w.Message != "" {
		if _, err := regexp.Compile(w.Message); err != nil {
			return fmt.Errorf("retry.when.message is not an RE2 regular expression: %v", err)
		}
	}
	for _, s := range w.HTTPStatus {
		if s < 100 || s > 599 {
			return fmt.Errorf("retry.when.httpStatus %d is not an HTTP status (100-599)", s)
		}
	}
	return nil
}

// Matches reports whether e satisfies every condition of the rule.
func (w RetryWhen) Matches(e *Error) bool {
	if e == nil {
		return false
	}
	if len(w.HTTPStatus) > 0 {
		s, ok := HTTPStatusOf(e)
		if !ok || !slices.Contains(w.HTTPStatus, s) {
			return false
		}
	}
	if len(w.ExitCode) > 0 {
		c, ok := ExitCodeOf(e)
		if !ok || !slices.Contains(w.ExitCode, c) {
			return false
		}
	}
	if w.Message != "" {
		re, err := compiledRule(w.Message)
		if err != nil || !re.MatchString(e.Message) {
			return false
		}
	}
	return true
}

// rules caches the compiled message expressions: a rule is read at every failure.
var rules sync.Map // string -> *regexp.Regexp

func compiledRule(expr string) (*regexp.Regexp, error) {
	if re, ok := rules.Load(expr); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	rules.Store(expr, re)
	return re, nil
}

// HTTPStatusOf returns the HTTP status an error's cause carries (a cause with an
// HTTPStatus() int method, such as a tools-file HTTP tool's), if any.
func HTTPStatusOf(err error) (int, bool) {
	var s interface{ HTTPStatus() int }
	if errors.As(err, &s) {
		return s.HTTPStatus(), true
	}
	return 0, false
}

// ExitCodeOf returns the exit code an error's cause carries (a cause with a
// ProcessExitCode() int method, such as a tools-file command's), if any.
func ExitCodeOf(err error) (int, bool) {
	var c interface{ ProcessExitCode() int }
	if errors.As(err, &c) {
		return c.ProcessExitCode(), true
	}
	return 0, false
}

// Default retry settings.
const (
	DefaultMaxRetries     = 3
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultMultiplier     = 2.0
	DefaultJitter         = 0.5
)

// DefaultRetryPolicy is 3 retries, 100 ms initial backoff doubling up to 5 s, ±50% jitter,
// on tool errors and timeouts.
func DefaultRetryPolicy() RetryPolicy {
	n, j := DefaultMaxRetries, DefaultJitter
	return RetryPolicy{MaxRetries: &n, InitialBackoff: Duration(DefaultInitialBackoff),
		MaxBackoff: Duration(DefaultMaxBackoff), Multiplier: DefaultMultiplier, Jitter: &j,
		RetryOn: RetryableByDefault()}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxRetries != nil {
		d.MaxRetries = p.MaxRetries
	}
	if p.InitialBackoff > 0 {
		d.InitialBackoff = p.InitialBackoff
	}
	if p.MaxBackoff > 0 {
		d.MaxBackoff = p.MaxBackoff
	}
	if p.Multiplier > 0 {
		d.Multiplier = p.Multiplier
	}
	if p.Jitter != nil {
		d.Jitter = p.Jitter
	}
	if len(p.RetryOn) > 0 {
		d.RetryOn = p.RetryOn
	}
	if d.When = p.When; d.When != nil && len(p.RetryOn) == 0 {
		d.RetryOn = nil // a rule's default codes include tool_error_permanent (ShouldRetryError)
	}
	return d
}

// Retries returns the number of retries after the first attempt.
func (p RetryPolicy) Retries() int {
	if p.MaxRetries == nil {
		return DefaultMaxRetries
	}
	return *p.MaxRetries
}

// ShouldRetry reports whether an attempt that failed with code may be tried again.
func (p RetryPolicy) ShouldRetry(code Code) bool {
	if !code.Retryable() {
		return false
	}
	on := p.RetryOn
	if len(on) == 0 {
		on = RetryableByDefault()
	}
	for _, c := range on {
		if c == code {
			return true
		}
	}
	return false
}

// ShouldRetryError reports whether an attempt that failed with e may be tried again.
// Without When it is ShouldRetry(e.Code). With When, the code must be in RetryOn (empty:
// [RetryableByDefault] and tool_error_permanent) and be [Code.Retryable] or
// tool_error_permanent — a tool's own "a retry cannot fix it" yields to a rule that names
// the failure — and e must match When.
func (p RetryPolicy) ShouldRetryError(e *Error) bool {
	if e == nil {
		return false
	}
	if p.When == nil {
		return p.ShouldRetry(e.Code)
	}
	if !e.Code.Retryable() && e.Code != CodeToolFailedPermanent {
		return false
	}
	on := p.RetryOn
	if len(on) == 0 {
		on = append(RetryableByDefault(), CodeToolFailedPermanent)
	}
	return slices.Contains(on, e.Code) && p.When.Matches(e)
}

// Backoff returns the delay before retry number n (1 for the first retry), before jitter.
func (p RetryPolicy) Backoff(n int) time.Duration {
	p = p.withDefaults()
	d := float64(p.InitialBackoff)
	for i := 1; i < n; i++ {
		d *= p.Multiplier
		if d >= float64(p.MaxBackoff) {
			return time.Duration(p.MaxBackoff)
		}
	}
	return min(time.Duration(d), time.Duration(p.MaxBackoff))
}

// BackoffJittered returns Backoff(n) moved by up to ±Jitter of itself; u is a random
// number in [0,1) supplied by the caller so that tests can fix it.
func (p RetryPolicy) BackoffJittered(n int, u float64) time.Duration {
	p = p.withDefaults()
	b := float64(p.Backoff(n))
	j := *p.Jitter
	return time.Duration(b * (1 - j + 2*j*u))
}

// Duration is a time.Duration that travels in JSON as a Go duration string ("1.5s") and
// is read from either such a string or a number of milliseconds.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string such as "30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads "30s" or 30000 (milliseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string like \"30s\" or milliseconds", b)
	}
	*d = Duration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}
