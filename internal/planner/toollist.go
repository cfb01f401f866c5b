package planner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ToolStatus is a tool of the live catalog and how its fleet is doing, as GET /v1/tools
// shows it.
type ToolStatus struct {
	Name         string             `json:"name"`
	Description  string             `json:"description"`
	Parameters   json.RawMessage    `json:"parameters,omitempty"`
	Roles        []string           `json:"roles"`
	Tenants      []string           `json:"tenants"`
	Safe         bool               `json:"safe"`
	ReadOnly     bool               `json:"readOnly"`
	Capabilities []string           `json:"capabilities"`
	NoSchemaMode tools.NoSchemaMode `json:"noSchemaMode,omitempty"`
	// Executors is how many replicas serve it now: the larger of the pull requests
	// waiting on its consumer (one per idle replica and shard: a replica with no free
	// slot has none) and the replicas that answered its calls within the recent window,
	// ExecutorIDs.
	Executors   int      `json:"executors"`
	ExecutorIDs []string `json:"executorIds"`
	// Waiting counts its calls not delivered to an executor yet; InFlight those
	// delivered and not acknowledged (running, waiting for a slot or an approval).
	Waiting  uint64      `json:"waiting"`
	InFlight int         `json:"inFlight"`
	Recent   RecentCalls `json:"recent"`
}

// ListTools lists the catalog's tools caller may call, sorted by name, with their
// consumers' state (one consumer info per call stream shard and tool) and their recent
// calls (toolstats.go).
func (p *Planner) ListTools(ctx context.Context, caller events.Identity) ([]ToolStatus, error) {
	now := p.cfg.Now()
	out := []ToolStatus{}
	for _, name := range p.cat.names() {
		d, ok := p.cat.get(name)
		if !ok || !d.AllowsCaller(caller.Tenant, caller.Role) {
			continue
		}
		s := ToolStatus{Name: d.Name, Description: d.Description, Parameters: d.Parameters, Roles: orEmpty(d.Roles),
			Tenants: orEmpty(d.Tenants), Safe: d.Safe, ReadOnly: d.ReadOnly(), Capabilities: orEmpty(d.Capabilities),
			NoSchemaMode: d.NoSchemaMode}
		waitingPulls := 0
		for _, stream := range p.cfg.Events.CallStreams() {
			cons, err := p.js.Consumer(ctx, stream, events.ConsumerName(name))
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue // no executor started for it on this shard yet
			}
			if err != nil {
				return nil, err
			}
			info := cons.CachedInfo()
			s.Waiting += info.NumPending
			s.InFlight += info.NumAckPending
			waitingPulls = max(waitingPulls, info.NumWaiting)
		}
		s.Recent, s.ExecutorIDs = p.index.stats.recent(name, now)
		slices.Sort(s.ExecutorIDs)
		s.Executors = max(waitingPulls, len(s.ExecutorIDs))
		out = append(out, s)
	}
	return out, nil
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
