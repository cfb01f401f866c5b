package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Budgets of a dead letter: what is kept of the original message. Base64 makes the body
// a third larger in JSON, so with the header budget a dead letter stays well under a
// quarter of the stream's message limit and always fits.
const (
	deadLetterMaxBody    = 64 << 10
	deadLetterMaxHeaders = 16 << 10
	deadLetterMaxValue   = 1 << 10
)

// DeadLetterID is the event id of the dead letter of the message stored at seq in the
// calls stream: deterministic, so that two executors setting the same message aside
// store it once.
func DeadLetterID(seq uint64) string { return "seq-" + strconv.FormatUint(seq, 10) }

// NewDeadLetter encodes d, with what fits of orig (the message that could not be
// processed), as a dead letter on [DeadLetterSubject](d.Tool) with event id id (the call
// id when there is one; a fresh id when empty). limit is the body limit of the stream
// (Config.MaxMsgSize); the dead letter is cut to fit it, so storing it never fails for
// its size.
func NewDeadLetter(source, id string, d DeadLetter, orig Message, limit int) (*nats.Msg, error) {
	if id == "" || ValidateEventID("id", id) != nil {
		id = nuid.Next()
	}
	body, header := orig.Data(), orig.Headers()
	sum := sha256.Sum256(body)
	d.BodySize, d.BodySHA256 = len(body), hex.EncodeToString(sum[:])
	d.Subject = cut(orig.Subject(), deadLetterMaxValue)
	keep := min(deadLetterMaxBody, max(limit/8, 0))
	d.Body, d.BodyTruncated = body, len(body) > keep
	if d.BodyTruncated {
		d.Body = body[:keep]
	}
	d.Headers, d.HeadersTruncated = boundHeaders(header, min(deadLetterMaxHeaders, limit/8))
	run := ""
	if d.RunID != "" {
		run = ReplyID(d.RunID)
		d.RunID = run
	}
	if d.CallID != "" {
		d.CallID = ReplyID(d.CallID)
	}
	e := Event{ID: id, Type: TypeDeadLetter, Source: source, Time: time.Now(), RunID: run}
	if err := e.SetData(d); err != nil {
		return nil, err
	}
	if len(e.Data) > limit { // only with a tiny limit: keep a short description alone
		n := max(limit/8, 16)
		d.Body, d.Headers, d.BodyTruncated, d.HeadersTruncated = nil, nil, true, len(header) > 0
		d.Reason, d.Subject = cut(d.Reason, n), cut(d.Subject, n)
		if d.Error != nil {
			short := *d.Error
			short.Message, short.Violations = cut(short.Message, n), nil
			d.Error = &short
		}
		if err := e.SetData(d); err != nil {
			return nil, err
		}
	}
	return Encode(DeadLetterSubject(d.Tool), e)
}

// DecodeDeadLetter decodes a dead letter.
func DecodeDeadLetter(msg Message) (Event, DeadLetter, error) {
	return decodeAs[DeadLetter](msg, 0)
}

// boundHeaders copies h, cutting each value to deadLetterMaxValue bytes and stopping
// at budget bytes in all.
func boundHeaders(h nats.Header, budget int) (map[string][]string, bool) {
	if len(h) == 0 {
		return nil, false
	}
	out := make(map[string][]string, len(h))
	cutAny, used := false, 0
	for k, vs := range h {
		for _, v := range vs {
			c := cut(v, deadLetterMaxValue)
			if used+len(k)+len(c) > budget {
				return out, true
			}
			cutAny = cutAny || len(c) < len(v)
			used += len(k) + len(c)
			out[cut(k, deadLetterMaxValue)] = append(out[cut(k, deadLetterMaxValue)], c)
		}
	}
	return out, cutAny
}

// cut returns s cut to at most n bytes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
