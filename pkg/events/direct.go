package events

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
)

// DirectGetLast reads the last message stored on subject (a literal subject) of stream
// with a direct get, naming the subject in the request's subject — the form NATS
// permissions can check, so a tenant's user may be allowed its own subjects only. It
// returns nil, nil when the subject holds no message. The message's headers are the
// stored ones (plus the server's Nats-Stream, Nats-Sequence, …), so it decodes like a
// delivered one ([CoreMsg]).
func DirectGetLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*nats.Msg, error) {
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return nil, err
	}
	switch m.Header.Get("Status") {
	case "":
		return &nats.Msg{Subject: subject, Header: m.Header, Data: m.Data}, nil
	case "404":
		return nil, nil
	default:
		return nil, fmt.Errorf("direct get of %s on %s: %s %s", subject, stream, m.Header.Get("Status"), m.Header.Get("Description"))
	}
}
