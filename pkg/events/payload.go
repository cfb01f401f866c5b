package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Why a stream and not a JetStream object store: an object store bucket per tenant would
// need stream names NATS permissions cannot match by pattern, and nats.go's object Put
// (v1.55) makes a publisher per call whose status goroutine can be left blocked forever
// when the Put ends quickly — a goroutine lost per unlucky payload, which the tests'
// leak check caught. Chunks on a stream are read with plain direct gets, by any client.

// PayloadRef points at a payload stored by reference (a claim check): a payload larger
// than [Config].ClaimCheckBytes is stored in chunks on the stream TOOLFLEET_PAYLOADS and
// the event carries a PayloadRef instead — a result's OutputRef in place of its Output, a
// call's ArgumentsRef in place of its Arguments. Chunk n (0 ≤ n < Chunks) is the last
// message on [PayloadSubject](Tenant, ID, n): toolfleet.payload.<id>.<n>, followed by
// .<tenant> for a tenant's payload, so a tenant's NATS user can be allowed to read its
// own payloads (a direct get names the subject) and no other's. The chunks' bodies, in
// order, are the payload: Size bytes whose SHA-256 (hex) is SHA256, checked when it is
// read. Payloads are kept as long as results (ResultsMaxAge).
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
// Whether the payload is there, and matches, only reading it tells.
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
