package planner

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Usage records: for every call of a run that returned ok, the planner publishes the
// run's request (its input preview, at most inputPreviewRunes characters) and the tool
// to events.StreamUsage, which pickers learn from (pkg/pick's Learned). A call that
// failed, was refused, denied or canceled teaches nothing and is not recorded. The
// record's id is the call id, so a result recorded twice (a replica retrying) is one
// record. Config.NoUsage turns them off; New creates the stream unless they are off.

// ensureUsage creates the usage stream unless usage records are off, and reports
// whether they are on. A planner whose user may not create it (a deployment's older
// permissions) runs without usage records and says so, rather than not at all.
func ensureUsage(ctx context.Context, js jetstream.JetStream, cfg Config) bool {
	if cfg.NoUsage {
		return false
	}
	err := jsutil.RetrySetup(ctx, func(ctx context.Context) error { return jsutil.EnsureUsage(ctx, js, cfg.Events) }, nil)
	if err != nil {
		cfg.Log.Warn().Err(err).Msg("planner: usage stream unavailable; no usage records (pickers will not learn)")
		return false
	}
	return true
}

// recordUsage publishes the usage record of call c of run r, which returned ok. It does
// not wait for the server's acknowledgement (a lost record costs a picker one example),
// only for room to publish while JetStream falls behind, until ctx ends.
func (p *Planner) recordUsage(ctx context.Context, r *Run, c *CallRecord) {
	if p.cfg.NoUsage || c.Status != string(events.StatusOK) || r.InputPreview == "" {
		return
	}
	u := events.Usage{Tenant: r.Tenant, RunID: r.ID, CallID: c.ID, Step: c.Step, Tool: c.Name,
		Request: r.InputPreview, At: p.cfg.Now(), ToolKey: p.cat.learnKey(c.Name)}
	msg, err := events.NewUsage(p.cfg.Source, u)
	if err == nil {
		_, err = p.win.Publish(ctx, msg)
	}
	if err != nil {
		p.log.Warn().Err(err).Str("run_id", r.ID).Str("call_id", c.ID).Msg("usage record not published")
	}
}
