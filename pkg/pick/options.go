package pick

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Defaults of [Options].
const (
	DefaultMaxCandidates = 3
	DefaultMinScore      = 0.05
	// DefaultMaxInputBytes is where a long input is cut: about two pages of text, more
	// than any request needs to name its tools.
	DefaultMaxInputBytes = 8 << 10
	// MaxCandidatesLimit bounds MaxCandidates.
	MaxCandidatesLimit = 1000
)

// Errors of Pick. Match them with errors.Is.
var (
	// ErrEmptyInput: the input is nil, empty or only white space. A pick without a
	// request has no meaning; the caller gets an error, not an arbitrary list.
	ErrEmptyInput = errors.New("pick: empty input")
	// ErrInvalidOption: an option is out of range.
	ErrInvalidOption = errors.New("pick: invalid option")
	// ErrScorerFailed: the scorer returned an error; the error says which scorer.
	ErrScorerFailed = errors.New("pick: scorer failed")
)

// Options steer one pick. The zero value picks with the defaults. The JSON form is what
// the picker service accepts in a request.
type Options struct {
	// MaxCandidates is how many tools to return at most. 0 means 3; at most 1000.
	MaxCandidates int `json:"maxCandidates,omitempty"`
	// MinScore drops tools whose normalised score (0..1) is below it. Nil means 0.05;
	// use new(0.0) to keep every tool the scorer ranks.
	MinScore *float64 `json:"minScore,omitempty"`
	// AllowUnsafe lets tools with Safe false be candidates. By default they never are.
	AllowUnsafe bool `json:"allowUnsafe,omitempty"`
	// Scorer ranks the candidates. Nil means BM25 with the catalog's parameters.
	Scorer Scorer `json:"-"`
	// Timeout bounds scoring. When it passes, the pick falls back to the first
	// MaxCandidates allowed tools in registration order, with score 0 and
	// Provenance.Fallback set. Zero means no bound (the context still applies).
	Timeout tools.Duration `json:"timeout,omitempty"`
	// Debug adds the scorer's details to each result's provenance: for BM25 the query
	// terms that matched, in which fields, and what each contributed.
	Debug bool `json:"debug,omitempty"`
	// Tools, when not empty, restricts the candidates to the tools of these names (a run's
	// own tool set, say); the other filters still apply.
	Tools []string `json:"tools,omitempty"`
	// IncludeTags, when not empty, keeps only tools carrying at least one of these tags.
	IncludeTags []string `json:"includeTags,omitempty"`
	// ExcludeTags drops tools carrying any of these tags.
	ExcludeTags []string `json:"excludeTags,omitempty"`
	// Role is the caller's role. A tool with Roles set is a candidate only for callers
	// whose role is listed; a tool without Roles is open to every caller.
	Role string `json:"role,omitempty"`
	// Capabilities lists what the caller needs (e.g. "streaming"); a tool must declare
	// all of them.
	Capabilities []string `json:"capabilities,omitempty"`
	// MaxInputBytes cuts longer input (at a character boundary) before analysis; the
	// provenance says so. 0 means 8 KiB.
	MaxInputBytes int `json:"maxInputBytes,omitempty"`
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.MaxCandidates < 0 || o.MaxCandidates > MaxCandidatesLimit:
		return o, fmt.Errorf("%w: maxCandidates must be between 1 and %d, got %d", ErrInvalidOption, MaxCandidatesLimit, o.MaxCandidates)
	case o.MinScore != nil && !(*o.MinScore >= 0 && *o.MinScore <= 1):
		return o, fmt.Errorf("%w: minScore must be between 0 and 1, got %v", ErrInvalidOption, *o.MinScore)
	case o.Timeout < 0:
		return o, fmt.Errorf("%w: timeout must not be negative, got %s", ErrInvalidOption, time.Duration(o.Timeout))
	case o.MaxInputBytes < 0:
		return o, fmt.Errorf("%w: maxInputBytes must not be negative, got %d", ErrInvalidOption, o.MaxInputBytes)
	}
	if o.MaxCandidates == 0 {
		o.MaxCandidates = DefaultMaxCandidates
	}
	if o.MinScore == nil {
		o.MinScore = new(DefaultMinScore)
	}
	if o.MaxInputBytes == 0 {
		o.MaxInputBytes = DefaultMaxInputBytes
	}
	if o.Scorer == nil {
		o.Scorer = BM25{}
	}
	return o, nil
}
