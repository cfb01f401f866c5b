package jsutil

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
)

// DirectGetLast reads the last message stored on subject (a literal subject) of stream
// with a direct get, naming the subject in the request's subject — the form NATS
// permissions can check, so a tenant's user may be allowed its own subjects only. It
// returns nil, nil when the subject holds no message. The message's headers are the
// stored ones (plus the server's Nats-Stream, Nats-Sequence, …), so it decodes like a
// delivered one ([events.CoreMsg]).
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

// DirectGetWritten is [DirectGetLast] for a message that was stored (its write was
// acknowledged) before whoever asks learned of it. A replicated stream's followers answer
// direct gets too, and one may not have stored it yet: a miss is asked again a few times,
// a little later each (about 150ms in all), before it is believed. It needs no more
// permission than DirectGetLast ([LeaderGetLast] asks for the stream's message get).
func DirectGetWritten(ctx context.Context, nc *nats.Conn, stream, subject string) (*nats.Msg, error) {
	b := tick.Backoff{First: 10 * time.Millisecond}
	for {
		m, err := DirectGetLast(ctx, nc, stream, subject)
		wait := b.Next()
		if m != nil || err != nil || wait > 80*time.Millisecond {
			return m, err
		}
		if !tick.Sleep(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// LeaderGetLast reads the last message stored on subject of stream from the stream's
// leader: the JetStream API's message get, not a direct get. On a replicated stream a
// direct get may be answered by a follower that has not yet stored a write the leader
// acknowledged, so a miss there proves nothing; confirm it here. It returns nil, nil when
// the subject holds no message. The request goes to $JS.API (no domain or API prefix).
func LeaderGetLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	req, err := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if err != nil {
		return nil, err
	}
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("get the last message of %s on %s: %w", subject, stream, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("get the last message of %s on %s: %w", subject, stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil
	case resp.Error != nil:
		return nil, fmt.Errorf("get the last message of %s on %s: %w", subject, stream, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("get the last message of %s on %s: an answer without a message", subject, stream)
	}
	out := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Seq, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("get the last message of %s on %s: %w", subject, stream, err)
		}
	}
	return out, nil
}
