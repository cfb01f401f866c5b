package events

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Payloads larger than [Config].ClaimCheckBytes travel by reference (a claim check): the
// payload is stored in chunks on the stream TOOLFLEET_PAYLOADS and the event carries a
// [PayloadRef] instead — a result's OutputRef in place of its Output. A chunk's subject
// is toolfleet.payload.<id>.<n>, followed by .<tenant> for a tenant's payload, so a
// tenant's NATS user can be allowed to read its own payloads (a direct get names the
// subject) and no other's. Payloads are kept as long as results (ResultsMaxAge).
//
// Why a stream and not a JetStream object store: an object store bucket per tenant would
// need stream names NATS permissions cannot match by pattern, and nats.go's object Put
// (v1.55) makes a publisher per call whose status goroutine can be left blocked forever
// when the Put ends quickly — a goroutine lost per unlucky payload, which the tests'
// leak check caught. Chunks on a stream are read with plain direct gets, by any client.

// PayloadRef points at a payload stored by reference: its id, the tenant it belongs to,
// its size, the number of chunks and its SHA-256 (hex), checked when it is read.
type PayloadRef struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
	Size   int64  `json:"size"`
	Chunks int    `json:"chunks"`
	SHA256 string `json:"sha256"`
}

// Check refuses a reference that cannot point at a stored payload: an id that is not a
// subject token, a tenant that is not one, a negative size, a chunk count below 1 or
// above the size (every chunk but an empty payload's holds at least one byte), or a
// SHA-256 that is not 64 hex digits. It is an invalid_event *tools.Error saying which.
// Whether the payload is there, and matches, only reading it tells ([Payloads.Get]).
func (r *PayloadRef) Check() error {
	if _, err := PayloadSubject(r.Tenant, r.ID, 0); err != nil {
		return tools.Errorf(tools.CodeInvalidEvent, "payload reference: %v", err)
	}
	if r.Size < 0 || r.Chunks < 1 || int64(r.Chunks) > max(r.Size, 1) {
		return tools.Errorf(tools.CodeInvalidEvent, "payload reference %s: %d chunks cannot hold %d bytes", r.ID, r.Chunks, r.Size)
	}
	if len(r.SHA256) != sha256.Size*2 {
		return tools.Errorf(tools.CodeInvalidEvent, "payload reference %s: sha256 %q is not 64 hex digits", r.ID, r.SHA256)
	}
	if _, err := hex.DecodeString(r.SHA256); err != nil {
		return tools.Errorf(tools.CodeInvalidEvent, "payload reference %s: sha256 %q is not 64 hex digits", r.ID, r.SHA256)
	}
	return nil
}

// PayloadSubject is the subject of chunk n of payload id of tenant:
// toolfleet.payload.<id>.<n>[.<tenant>].
func PayloadSubject(tenant, id string, n int) (string, error) {
	if !isIDToken(id, 128) {
		return "", fmt.Errorf("payload id %q is not a subject token", id)
	}
	return withTenant(payloadPrefix+id+"."+strconv.Itoa(n), tenant)
}

// PayloadStream returns the configuration of the payloads stream.
func (c Config) PayloadStream() jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{
		Name: StreamPayloads, Description: "toolfleet payloads stored by reference, in chunks",
		Subjects: []string{AllPayloads}, Retention: jetstream.LimitsPolicy, Storage: c.storage(),
		Replicas: c.Replicas, MaxAge: c.ResultsMaxAge.D(), MaxMsgSize: c.MaxMsgSize + HeaderAllowance,
		Discard: jetstream.DiscardOld, AllowDirect: true,
	}
}

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
func NewPayloads(js jetstream.JetStream, cfg Config) *Payloads {
	cfg = cfg.WithDefaults()
	chunk := int(cfg.MaxMsgSize) / 2
	if mp := int(js.Conn().MaxPayload()) - HeaderAllowance; mp > 0 && mp < chunk {
		chunk = mp // a chunk must fit the server's max payload too
	}
	return &Payloads{nc: js.Conn(), js: js, chunk: chunk, max: cfg.PayloadMaxBytes}
}

// Put stores data as a payload of tenant and returns its reference.
func (p *Payloads) Put(ctx context.Context, tenant string, data []byte) (*PayloadRef, error) {
	ref := &PayloadRef{ID: nuid.Next(), Tenant: tenant, Size: int64(len(data))}
	sum := sha256.Sum256(data)
	ref.SHA256 = hex.EncodeToString(sum[:])
	var futures []jetstream.PubAckFuture
	for off := 0; off < len(data) || ref.Chunks == 0; off += p.chunk {
		subj, err := PayloadSubject(tenant, ref.ID, ref.Chunks)
		if err != nil {
			return nil, err
		}
		f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: subj, Data: data[off:min(off+p.chunk, len(data))]})
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
				ref.ID, payloadTimeout, AllPayloads)
		}
	}
	return ref, nil
}

// Get reads the payload ref points at, refusing one larger than max bytes (0: the
// configured PayloadMaxBytes) and one whose bytes do not match the reference. It reads
// each chunk with a direct get of its subject, which a tenant's user is allowed for its
// own payloads.
func (p *Payloads) Get(ctx context.Context, ref *PayloadRef, max int64) ([]byte, error) {
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
		subj, err := PayloadSubject(ref.Tenant, ref.ID, n)
		if err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, payloadTimeout)
		m, err := DirectGetLast(rctx, p.nc, StreamPayloads, subj)
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
