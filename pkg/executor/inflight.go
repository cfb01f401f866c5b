package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// markStarted records durably, before a non-idempotent tool runs, that the call
// started. first is false when a marker was already there: the call started before (on
// this or another replica, which then crashed or lost its ack) and must not run again.
// The marker lives in the toolfleet-inflight bucket for InflightMaxAge, keyed by the
// call id's token ([events.IDToken]: any id makes a valid key), followed by .<tenant> for
// a tenant's call (two tenants may use the same call id); only non-idempotent tools pay
// for it.
func (ex *Executor) markStarted(ctx context.Context, j *job) (first bool, err error) {
	v, _ := json.Marshal(map[string]any{"executor": ex.o.id, "tool": j.def.Name, "started_at": time.Now().UTC()})
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	key := events.IDToken(j.ce.ID)
	if t := j.ce.Caller.Tenant; t != "" {
		key += "." + t
	}
	_, err = ex.inflight.Create(ctx, key, v)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	return err == nil, err
}
