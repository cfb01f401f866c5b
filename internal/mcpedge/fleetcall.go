package mcpedge

import (
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// clientFor is the fleet client that calls as caller: pkg/client publishes the call on
// the caller's call subject and waits for its result (a core subscription made before
// the publish, with direct gets for a result stored before or missed), reading an
// output stored by reference. One client per identity, made on first use.
func (e *Edge) clientFor(caller events.Identity) (*client.Client, error) {
	if c, ok := e.clients.Load(caller); ok {
		return c.(*client.Client), nil
	}
	opts := []client.Option{client.WithSource("/toolfleet/mcp-edge")}
	if !caller.IsZero() {
		opts = append(opts, client.WithIdentity(caller))
	}
	c, err := client.New(e.nc, opts...)
	if err != nil {
		return nil, err
	}
	actual, _ := e.clients.LoadOrStore(caller, c)
	return actual.(*client.Client), nil
}
