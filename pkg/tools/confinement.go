package tools

import "fmt"

// Confinement says whether a tool that declares [CapabilityReadOnly] is kept to reads
// by something other than its word: a runner that can enforce it (a Landlock sandbox
// for a command, GET for an HTTP endpoint, an MCP server's readOnlyHint) registers the
// tool with [WithConfinement]. The executor runs a read-only tool only when it is
// confined; otherwise each call waits for an approval, with Why as the reason.
type Confinement struct {
	// Confined is true when the runner keeps the tool to read operations.
	Confined bool
	// Why says how it is kept to reads, or why it cannot be.
	Why string
}

// WithConfinement records how the tool's runner keeps it to reads; see [Confinement].
// A tool registered without it is a Go tool, whose read-only declaration is a promise
// its author makes: it counts as confined.
func WithConfinement(c Confinement) Option {
	return func(o *toolOptions) { o.confinement = &c }
}

// authorsWord is the confinement of a tool registered without [WithConfinement].
var authorsWord = Confinement{Confined: true, Why: "a Go tool: its read-only capability is its author's promise"}

// Confinement returns how the tool called name is kept to reads (see [Confinement]),
// and false when no such tool is registered.
func (r *Registry) Confinement(name string) (Confinement, bool) {
	e, ok := r.snap.Load().byName[name]
	if !ok {
		return Confinement{}, false
	}
	if e.confinement == nil {
		return authorsWord, true
	}
	return *e.confinement, true
}

// ApprovalReason says why a call of the tool called name must be approved before it
// runs, or "" when it need not: the tool is not Safe, it takes unvalidated arguments
// under [NoSchemaHumanApproval], or it declares [CapabilityReadOnly] and its runner
// cannot confine it to reads ([Confinement]). An unknown tool needs none.
func (r *Registry) ApprovalReason(name string) string {
	e, ok := r.snap.Load().byName[name]
	if !ok {
		return ""
	}
	d := e.def
	switch {
	case !d.Safe:
		return fmt.Sprintf("tool %q is not marked safe", d.Name)
	case !d.Validated() && d.NoSchemaMode == NoSchemaHumanApproval:
		return fmt.Sprintf("tool %q takes unvalidated arguments (noSchemaMode human-approval)", d.Name)
	case d.ReadOnly() && e.confinement != nil && !e.confinement.Confined:
		return fmt.Sprintf("tool %q declares itself read-only, but toolfleet cannot confine it to reads: %s", d.Name, e.confinement.Why)
	}
	return ""
}
