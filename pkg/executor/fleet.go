package executor

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Fleet is how a tool running in an executor reaches the fleet it serves: the
// executor's connection and the fleet's JetStream settings. Tools that call other tools
// (a tools file's composites) or ask NATS services (its declarative callbacks) take it
// from their context with [FleetFrom].
type Fleet struct {
	Conn   *nats.Conn
	Events events.Config
	// Log is the executor's log, for what a tool notices without failing its call (a
	// cache bucket it cannot reach). The zero Logger logs nothing.
	Log zerolog.Logger
	// Stopped is closed when the executor cuts the calls in flight short at shutdown
	// (its grace period is over): a call whose context ends then is handed back, and runs
	// again on another replica, so a tool that started work of its own for the call (a
	// composite's sub-calls) leaves it for that run to find. Nil outside an executor.
	Stopped <-chan struct{}
}

type fleetKey struct{}

// FleetFrom returns the fleet of the executor running the call ctx belongs to; false
// outside an executor.
func FleetFrom(ctx context.Context) (Fleet, bool) {
	f, ok := ctx.Value(fleetKey{}).(Fleet)
	return f, ok
}

// WithFleet returns a context carrying f, for running a tool outside an executor (a
// test, a program calling tools directly) as an executor would.
func WithFleet(ctx context.Context, f Fleet) context.Context {
	return context.WithValue(ctx, fleetKey{}, f)
}
