package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// markStarted records durably, before a non-idempotent tool runs, that the call
// started. first is false when a marker was already there: the call started before (on
// this or another replica, which then crashed or lost its ack) and must not run again.
// The marker lives in the toolfleet-inflight bucket for InflightMaxAge, keyed by the
// call id's token ([events.IDToken]: any id makes a valid key), followed by .<tenant> for
// a tenant's call (two tenants may use the same call id); only non-idempotent tools pay
// for it.
//
// A marker write whose answer is lost (a timeout while the bucket elects a leader) may
// still have been stored: were the call handed back then, its next delivery would find
// this write's marker and answer interrupted a call that never ran. So each write
// carries a token of its own and is tried again until it is answered, for up to
// markTimeout: a marker found with this write's token is this write's, and the tool may
// run.
func (ex *Executor) markStarted(ctx context.Context, j *job) (first bool, err error) {
	token := nuid.Next()
	v, err := json.Marshal(map[string]any{"executor": ex.o.id, "tool": j.def.Name, "started_at": time.Now().UTC(), "token": token})
	if err != nil {
		return false, err
	}
	key := events.IDToken(j.ce.ID)
	if t := j.ce.Caller.Tenant; t != "" {
		key += "." + t
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	b := tick.Backoff{First: 100 * time.Millisecond, Max: time.Second}
	for {
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = ex.inflight.Create(tctx, key, v)
		if errors.Is(err, jetstream.ErrKeyExists) {
			var e jetstream.KeyValueEntry
			if e, err = ex.inflight.Get(tctx, key); err == nil {
				tcancel()
				var m struct{ Token string }
				_ = json.Unmarshal(e.Value(), &m) // a marker that does not decode is not this write's
				return m.Token == token, nil
			}
		}
		tcancel()
		if err == nil || ctx.Err() != nil {
			return err == nil, err
		}
		if !b.Sleep(ctx) {
			return false, err
		}
	}
}

// markTimeout bounds the tries of one marker write (the call is kept alive meanwhile).
const markTimeout = 30 * time.Second
