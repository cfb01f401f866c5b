package events

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Usage records: for each call of a planner run that succeeded, the run's request and
// the tool it led to, which pickers learn from (pkg/pick's Learned). They live in
// [StreamUsage], on [UsageSubject].
const (
	StreamUsage = "TOOLFLEET_USAGE"
	// AllUsage matches every usage record: toolfleet.usage.<tool>[.<tenant>].
	AllUsage    = "toolfleet.usage.>"
	usagePrefix = "toolfleet.usage."
	// TypeUsage is the CloudEvents type of a usage record.
	TypeUsage = "io.toolfleet.tool.usage"
	// UsageMaxAge and UsageMaxBytes bound [StreamUsage]: what pickers replay on start
	// is the last 30 days, at most 1 GiB (about 2 million records); older records are
	// dropped first.
	UsageMaxAge   = 30 * 24 * time.Hour
	UsageMaxBytes = 1 << 30
	// MaxUsageRequestBytes bounds a record's request text: the start of a run's input
	// says what it is for, and a bounded record keeps the stream and the pickers small.
	MaxUsageRequestBytes = 1024
)

// Usage is one usage record: a call of Tool at step Step of run RunID, started by a
// caller of Tenant with the request Request, returned ok.
type Usage struct {
	Tenant  string `json:"tenant,omitempty"`
	RunID   string `json:"runId"`
	CallID  string `json:"callId"`
	Step    int    `json:"step"`
	Tool    string `json:"tool"`
	Request string `json:"request"`
	// ToolKey is pick.LearnKey of the definition the call ran with, when the publisher
	// knows it: a picker drops a record made for another version of the tool.
	ToolKey string    `json:"toolKey,omitempty"`
	At      time.Time `json:"at"`
}

// UsageSubject is where usage of tool by a caller of tenant is recorded:
// toolfleet.usage.<tool>, followed by .<tenant> for a tenant's run.
func UsageSubject(tenant, tool string) (string, error) {
	if err := ValidateTool(tool); err != nil {
		return "", err
	}
	return withTenant(usagePrefix+tool, tenant)
}

// NewUsage encodes u as a usage record on [UsageSubject](u.Tenant, u.Tool). Its event id
// is the call id, and its Nats-Msg-Id the call id qualified by the tenant, so a result
// recorded twice (a replica retrying) is one record. A request longer than
// [MaxUsageRequestBytes] is cut at a character boundary.
func NewUsage(source string, u Usage) (*nats.Msg, error) {
	subj, err := UsageSubject(u.Tenant, u.Tool)
	if err != nil {
		return nil, err
	}
	if u.RunID == "" || u.CallID == "" || strings.TrimSpace(u.Request) == "" {
		return nil, tools.Errorf(tools.CodeInvalidEvent, "a usage record needs a run id, a call id and a request")
	}
	u.Request = cutUTF8(u.Request, MaxUsageRequestBytes)
	if u.At.IsZero() {
		u.At = time.Now()
	}
	e := Event{ID: u.CallID, Type: TypeUsage, Source: source, Time: u.At, RunID: u.RunID}
	if err := e.SetData(u); err != nil {
		return nil, err
	}
	return Encode(subj, e)
}

// DecodeUsage decodes a usage record. The tool and tenant are those of the subject, so
// that a record cannot claim another tenant's place.
func DecodeUsage(msg Message) (Event, Usage, error) {
	e, u, err := decodeAs[Usage](msg, 0)
	if err != nil {
		return e, u, err
	}
	rest, ok := strings.CutPrefix(msg.Subject(), usagePrefix)
	if !ok {
		return e, u, tools.Errorf(tools.CodeInvalidEvent, "event %s on %s is not a usage record", e.ID, msg.Subject())
	}
	tool, tenant, _ := strings.Cut(rest, ".")
	if tool != u.Tool || tenant != u.Tenant {
		return e, u, tools.Errorf(tools.CodeInvalidEvent, "usage record %s names tool %q of tenant %q on subject %s",
			e.ID, u.Tool, u.Tenant, msg.Subject())
	}
	if strings.TrimSpace(u.Request) == "" {
		return e, u, tools.Errorf(tools.CodeInvalidEvent, "usage record %s has no request", e.ID)
	}
	return e, u, nil
}

// UsageStream is [StreamUsage]: limits retention, bounded by [UsageMaxAge] and
// [UsageMaxBytes], duplicates dropped by call id within the duplicate window.
func (c Config) UsageStream() jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{Name: StreamUsage, Description: "toolfleet usage records: requests and the tools that served them",
		Subjects: []string{AllUsage}, Retention: jetstream.LimitsPolicy, Storage: c.storage(), Replicas: c.Replicas,
		MaxAge: UsageMaxAge, MaxBytes: UsageMaxBytes, Discard: jetstream.DiscardOld, Duplicates: c.DuplicateWindow.D()}
}

// cutUTF8 shortens s to at most n bytes, at a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
