package executor

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/tick"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The janitor answers calls nobody will ever run. Every replica looks, every quarter of
// the no-such-tool timeout, at the subjects holding calls (the stream's per-subject
// counts; no consumer is created, so the work queue's one-consumer-per-tool rule is
// untouched):
//
//   - a tool subject (toolfleet.call.<tool>) whose tool has no catalog entry: it reads
//     the oldest calls of exactly that subject, answers those older than the timeout
//     no_such_tool, and deletes them. A tool that is in the catalog is never touched: its
//     executors are merely busy or restarting.
//   - any other subject under toolfleet.call. (a second token, a wildcard such as
//     toolfleet.call.* published literally, bytes that are not a tool name or not UTF-8):
//     no consumer will ever take its messages. Such a subject cannot always be read back
//     by name (a wildcard filter matches every tool's calls; invalid UTF-8 does not
//     survive the JSON of stream info), so the janitor walks the stream in sequence order
//     and answers exactly the messages whose subject is not a tool subject — invalid_event,
//     or a dead letter when they name no caller.
//
// The janitor only deletes a message whose subject it has compared byte for byte, and
// only once its answer is stored. Two janitors answering the same call store one result
// (see [events.NewResult]); a dead letter's id is the message's sequence.

const (
	janitorBatch = 256
	// strayScanBatch bounds the messages one sweep walks looking for stray subjects.
	strayScanBatch = 1024
)

// janitorState is the janitor's memory between sweeps: where its walk for stray
// subjects stopped, in each calls stream (shard). Only the janitor goroutine uses it.
type janitorState struct{ strayCursor []uint64 }

func (ex *Executor) janitor(ctx context.Context) {
	every := max(ex.o.noSuchToolAfter/4, 50*time.Millisecond)
	st := janitorState{strayCursor: make([]uint64, len(ex.calls))}
	tick.Every(ctx, every, func(ctx context.Context) {
		for shard, calls := range ex.calls {
			if err := ex.sweepUnserved(ctx, calls, &st.strayCursor[shard]); err != nil && ctx.Err() == nil {
				ex.o.log.Debug().Err(err).Str("stream", calls.CachedInfo().Config.Name).Msg("janitor")
			}
		}
	})
}

func (ex *Executor) sweepUnserved(ctx context.Context, calls jetstream.Stream, strayCursor *uint64) error {
	// Every subject: with shards, a subject the stream could not store under
	// toolfleet.call (a literal wildcard) keeps its toolfleet.shard.<n>.call form.
	info, err := calls.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return err
	}
	stray := false
	for subj := range info.State.Subjects {
		tool, ok := events.ToolOfCallSubject(subj)
		if !ok {
			stray = true
			continue
		}
		if _, served := ex.workers[tool]; served {
			continue
		}
		if _, listed, err := ex.catalog.Get(ctx, tool); err != nil || listed {
			continue
		}
		ex.answerUnserved(ctx, calls, subj, tool, info.State.FirstSeq)
	}
	if stray {
		ex.answerStrays(ctx, calls, strayCursor, info.State.FirstSeq)
	}
	return nil
}

// answerUnserved answers the calls of subj (the subject of tool, which nobody serves)
// that are older than the no-such-tool timeout.
func (ex *Executor) answerUnserved(ctx context.Context, calls jetstream.Stream, subj, tool string, seq uint64) {
	for range janitorBatch {
		raw, err := calls.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if err != nil {
			return // none left
		}
		seq = raw.Sequence + 1
		if raw.Subject != subj {
			continue // not this subject's: never touch what was not checked
		}
		if time.Since(raw.Time) < ex.o.noSuchToolAfter {
			return // the oldest is still young, and the rest are younger
		}
		ex.answerRaw(ctx, calls, raw, tools.Definition{Name: tool}, tools.Errorf(tools.CodeNoSuchTool,
			"no executor serves tool %q: it has not been in the catalog for the %s this call waited", tool, ex.o.noSuchToolAfter))
	}
}

// answerStrays walks up to strayScanBatch messages from where the last walk stopped
// and answers those on a subject that is not a tool subject.
func (ex *Executor) answerStrays(ctx context.Context, calls jetstream.Stream, cursor *uint64, first uint64) {
	seq := max(*cursor, first)
	for range strayScanBatch {
		raw, err := calls.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if err != nil {
			*cursor = 0 // the end (or a failure): start over next time
			return
		}
		seq = raw.Sequence + 1
		*cursor = seq
		if _, ok := events.ToolOfCallSubject(raw.Subject); ok {
			continue // a call of a tool: its consumer or answerUnserved deals with it
		}
		ex.answerRaw(ctx, calls, raw, tools.Definition{Name: "_invalid"}, nil)
	}
}

// answerRaw answers a call read directly from the stream, then deletes it (only once
// the answer is stored). failure nil means "refuse it for whatever DecodeCall says".
func (ex *Executor) answerRaw(ctx context.Context, calls jetstream.Stream, raw *jetstream.RawStreamMsg, def tools.Definition, failure *tools.Error) {
	nm := events.StoredMsg(raw)
	ce, err := events.DecodeCall(nm, int(ex.cfg.MaxMsgSize))
	j := ex.newJob(nil, &def, ce, raw.Time)
	j.res.Tool, j.seq = ce.Call.Tool, raw.Sequence
	j.afterStore = func() {
		if err := calls.DeleteMsg(ctx, raw.Sequence); err != nil {
			ex.o.log.Debug().Err(err).Uint64("seq", raw.Sequence).Msg("janitor: delete answered call")
		}
	}
	switch {
	case err != nil:
		ex.refuse(j, nm, err)
	case failure == nil: // DecodeCall refuses every stray subject; keep the rule local all the same
		ex.refuse(j, nm, tools.Errorf(tools.CodeInvalidEvent, "call %s: subject %q does not name a tool", ce.ID, raw.Subject))
	default:
		ex.fail(j, failure)
	}
}
