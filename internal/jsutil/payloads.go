package jsutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// ErrPayloadMismatch reports a payload whose stored bytes are not those its reference
// describes.
var ErrPayloadMismatch = errors.New("events: the stored payload does not match its reference")

// errPayloadGone: a chunk of the payload is not stored (expired, or never was).
var errPayloadGone = errors.New("events: the payload is not stored")

var errPayloadTooLarge = errors.New("payload over the limit")

// IsPayloadGone reports whether err, from [Payloads.Get], means the payload can never be
// read: a chunk is gone (expired), it does not match its reference, or it is over the
// limit. Other errors (a timeout, a lost connection) may pass.
func IsPayloadGone(err error) bool {
	return errors.Is(err, ErrPayloadMismatch) || errors.Is(err, errPayloadTooLarge) || errors.Is(err, errPayloadGone)
}

// payloadTimeout bounds one chunk's read.
const payloadTimeout = 10 * time.Second

// Payloads stores and reads payloads by reference. It is safe for concurrent use.
type Payloads struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	chunk int
	max   int64
}

// NewPayloads returns the payload store of cfg on js. Its stream is created by [Ensure].
func NewPayloads(js jetstream.JetStream, cfg events.Config) *Payloads {
	cfg = cfg.WithDefaults()
	chunk := int(cfg.MaxMsgSize) / 2
	if mp := int(js.Conn().MaxPayload()) - events.HeaderAllowance; mp > 0 && mp < chunk {
		chunk = mp // a chunk must fit the server's max payload too
	}
	return &Payloads{nc: js.Conn(), js: js, chunk: chunk, max: cfg.PayloadMaxBytes}
}

// Put stores data as a payload of tenant and returns its reference.
func (p *Payloads) Put(ctx context.Context, tenant string, data []byte) (*events.PayloadRef, error) {
	ref := &events.PayloadRef{ID: nuid.Next(), Tenant: tenant, Size: int64(len(data))}
	sum := sha256.Sum256(data)
	ref.SHA256 = hex.EncodeToString(sum[:])
	var futures []jetstream.PubAckFuture
	for off := 0; off < len(data) || ref.Chunks == 0; off += p.chunk {
		subj, err := events.PayloadSubject(tenant, ref.ID, ref.Chunks)
		if err != nil {
			return nil, err
		}
		f, err := PublishAsync(ctx, p.js, &nats.Msg{Subject: subj, Data: data[off:min(off+p.chunk, len(data))]})
		if err != nil {
			return nil, fmt.Errorf("store payload %s: %w", ref.ID, err)
		}
		futures = append(futures, f)
		ref.Chunks++
	}
	// Bounded even under a context without a deadline: a chunk refused by the server's
	// permissions is never acknowledged, and its publisher hears of it only by the
	// connection's error callback.
	wait := time.NewTimer(payloadTimeout)
	defer wait.Stop()
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return nil, fmt.Errorf("store payload %s: %w", ref.ID, err)
		case <-ctx.Done():
			return nil, fmt.Errorf("store payload %s: %w", ref.ID, ctx.Err())
		case <-wait.C:
			return nil, fmt.Errorf("store payload %s: no acknowledgement of its chunks within %s (is publishing on %s allowed?)",
				ref.ID, payloadTimeout, events.AllPayloads)
		}
	}
	return ref, nil
}

// Get reads the payload ref points at, refusing one larger than max bytes (0: the
// configured PayloadMaxBytes) and one whose bytes do not match the reference. It reads
// each chunk with a direct get of its subject, which a tenant's user is allowed for its
// own payloads.
func (p *Payloads) Get(ctx context.Context, ref *events.PayloadRef, max int64) ([]byte, error) {
	if max <= 0 {
		max = p.max
	}
	if ref.Size > max || ref.Size < 0 || ref.Chunks < 1 {
		return nil, fmt.Errorf("payload %s of %d bytes in %d chunks: %w of %d", ref.ID, ref.Size, ref.Chunks, errPayloadTooLarge, max)
	}
	if ref.Chunks > 1 && int64(ref.Chunks) > ref.Size { // no chunk is empty: such a reference lies
		return nil, fmt.Errorf("payload %s of %d bytes in %d chunks: %w", ref.ID, ref.Size, ref.Chunks, ErrPayloadMismatch)
	}
	data := make([]byte, 0, ref.Size)
	for n := range ref.Chunks {
		subj, err := events.PayloadSubject(ref.Tenant, ref.ID, n)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, payloadTimeout)
		m, err := DirectGetLast(rctx, p.nc, events.StreamPayloads, subj)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("read payload %s: %w", ref.ID, err)
		}
		if m == nil {
			return nil, fmt.Errorf("payload %s, chunk %d: %w", ref.ID, n, errPayloadGone)
		}
		if int64(len(data)+len(m.Data)) > ref.Size {
			return nil, fmt.Errorf("payload %s: %w", ref.ID, ErrPayloadMismatch)
		}
		data = append(data, m.Data...)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != ref.Size || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("payload %s: %w", ref.ID, ErrPayloadMismatch)
	}
	return data, nil
}
