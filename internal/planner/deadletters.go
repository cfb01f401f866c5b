package planner

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Bounds of a dead-letter page: the body shown of each, and how many dead letters one
// request reads at most (of other tenants too) before it answers with what it found and
// a cursor to go on from.
const (
	deadLetterBodyShown = 4 << 10
	deadLetterMaxScan   = 5000
)

// DeadLetterItem is a dead letter as GET /v1/dead-letters shows it.
type DeadLetterItem struct {
	Seq        uint64       `json:"seq"`
	Time       time.Time    `json:"time"`
	Tool       string       `json:"tool,omitempty"`
	CallID     string       `json:"callId,omitempty"`
	RunID      string       `json:"runId,omitempty"`
	Reason     string       `json:"reason"`
	Error      *tools.Error `json:"error,omitempty"`
	Subject    string       `json:"subject"`
	Deliveries uint64       `json:"deliveries,omitempty"`
	BodySize   int          `json:"bodySize"`
	// Body is the original body as text, cut to 4 KiB.
	Body string `json:"body"`
}

// DeadLetterPage is a page of dead letters, newest first; Next, when set, is the cursor
// of the next.
type DeadLetterPage struct {
	DeadLetters []DeadLetterItem `json:"deadLetters"`
	Next        string           `json:"next,omitempty"`
}

// DeadLetterFilter selects dead letters for [Planner.ListDeadLetters].
type DeadLetterFilter struct {
	Tool   string
	Limit  int
	Cursor string
}

// ListDeadLetters lists the dead letters of caller's tenant (the tenant of the subject
// the original message was published on), newest first, reading the dead-letter stream
// backwards in windows; a page reads at most deadLetterMaxScan of them (a short page
// with a cursor means there may be more below).
func (p *Planner) ListDeadLetters(ctx context.Context, caller events.Identity, f DeadLetterFilter) (DeadLetterPage, error) {
	limit, err := CheckLimit(f.Limit)
	if err != nil {
		return DeadLetterPage{}, err
	}
	filter := events.AllDeadLetters
	if f.Tool != "" {
		if events.ValidateTool(f.Tool) != nil {
			return DeadLetterPage{}, filterErrorf("tool", "%q is not a tool name (letters, digits, _ and -, at most 64)", f.Tool)
		}
		filter = events.DeadLetterSubject(f.Tool)
	}
	var below uint64 // from the cursor: the page holds sequences below it
	if f.Cursor != "" {
		if below, err = strconv.ParseUint(f.Cursor, 10, 64); err != nil || below == 0 {
			return DeadLetterPage{}, filterErrorf("cursor", "%q is not a cursor of this list (give the next of the previous page)", f.Cursor)
		}
	}
	stream, err := p.js.Stream(ctx, events.StreamDeadLetters)
	if err != nil {
		return DeadLetterPage{}, err
	}
	state := stream.CachedInfo().State
	page := DeadLetterPage{DeadLetters: []DeadLetterItem{}}
	if state.Msgs == 0 {
		return page, nil
	}
	upper := state.LastSeq + 1
	if below > 0 {
		upper = min(below, upper)
	}
	scanned, window := 0, uint64(64)
	for upper > state.FirstSeq && len(page.DeadLetters) <= limit {
		if scanned >= deadLetterMaxScan {
			page.Next = strconv.FormatUint(upper, 10)
			return page, nil
		}
		from := max(state.FirstSeq, upper-min(window, upper))
		found, n, err := p.readDeadLetters(ctx, filter, caller.Tenant, from, upper)
		if err != nil {
			return DeadLetterPage{}, err
		}
		scanned += n
		slices.Reverse(found)
		page.DeadLetters = append(page.DeadLetters, found...)
		upper, window = from, min(window*2, 1024)
	}
	if len(page.DeadLetters) > limit {
		page.DeadLetters = page.DeadLetters[:limit]
		page.Next = strconv.FormatUint(page.DeadLetters[limit-1].Seq, 10)
	}
	return page, nil
}

// readDeadLetters reads the dead letters of tenant on filter stored at sequences from
// (inclusive) to upper (exclusive), oldest first, and how many it read in all.
func (p *Planner) readDeadLetters(ctx context.Context, filter, tenant string, from, upper uint64) ([]DeadLetterItem, int, error) {
	cons, err := p.js.OrderedConsumer(ctx, events.StreamDeadLetters, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return nil, 0, err
	}
	var out []DeadLetterItem
	n := 0
	for {
		batch, err := cons.FetchNoWait(int(min(upper-from, 256)))
		if err != nil {
			return nil, 0, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil || meta.Sequence.Stream >= upper {
				return out, n, nil
			}
			n++
			if item, ok := deadLetterItem(m, meta.Sequence.Stream, tenant); ok {
				out = append(out, item)
			}
			from = meta.Sequence.Stream + 1
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, 0, err
		}
		if got == 0 || from >= upper {
			return out, n, nil
		}
	}
}

// deadLetterItem reads a dead letter of tenant; ok is false for another tenant's.
func deadLetterItem(m jetstream.Msg, seq uint64, tenant string) (DeadLetterItem, bool) {
	e, d, err := events.DecodeDeadLetter(m)
	if err != nil {
		// Not a dead letter the fleet wrote: shown to no tenant but the anonymous.
		if tenant != "" {
			return DeadLetterItem{}, false
		}
		return DeadLetterItem{Seq: seq, Reason: "not a readable dead letter: " + err.Error(), Subject: m.Subject(),
			BodySize: len(m.Data()), Body: shownBody(m.Data())}, true
	}
	if events.SubjectTenant(d.Subject) != tenant {
		return DeadLetterItem{}, false
	}
	return DeadLetterItem{Seq: seq, Time: e.Time, Tool: d.Tool, CallID: d.CallID, RunID: d.RunID, Reason: d.Reason,
		Error: d.Error, Subject: d.Subject, Deliveries: d.Deliveries, BodySize: d.BodySize, Body: shownBody(d.Body)}, true
}

func shownBody(b []byte) string {
	if len(b) > deadLetterBodyShown {
		b = b[:deadLetterBodyShown]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
