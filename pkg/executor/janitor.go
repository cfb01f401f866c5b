package executor

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The janitor answers calls nobody will ever run. A call of a tool that no executor
// serves would otherwise sit in the work queue until it expires, and its caller would
// wait in silence. Every replica looks, every quarter of the no-such-tool timeout, at
// the subjects holding calls (the stream's per-subject counts; no consumer is created,
// so the work queue's one-consumer-per-tool rule is untouched); for each whose tool has
// no catalog entry it reads the oldest calls directly, answers those older than the
// timeout no_such_tool, and deletes them. Two janitors answering the same call publish
// the same result id, which JetStream stores once. A tool that is in the catalog is
// never touched: its executors are merely busy or restarting.

const janitorBatch = 256

func (ex *Executor) janitor(ctx context.Context) {
	every := max(ex.o.noSuchToolAfter/4, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := ex.sweepUnserved(ctx); err != nil && ctx.Err() == nil {
				ex.o.log.Debug().Err(err).Msg("janitor")
			}
		}
	}
}

func (ex *Executor) sweepUnserved(ctx context.Context) error {
	stream, err := ex.js.Stream(ctx, events.StreamCalls)
	if err != nil {
		return err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.AllCalls))
	if err != nil {
		return err
	}
	for subj := range info.State.Subjects {
		tool, ok := events.ToolOfCallSubject(subj)
		if ok {
			if _, served := ex.workers[tool]; served {
				continue
			}
			if _, listed, err := ex.catalog.Get(ctx, tool); err != nil || listed {
				continue
			}
		}
		if !ok {
			tool = ""
		}
		ex.answerUnserved(ctx, stream, subj, tool, info.State.FirstSeq)
	}
	return nil
}

func (ex *Executor) answerUnserved(ctx context.Context, stream jetstream.Stream, subj, tool string, seq uint64) {
	for range janitorBatch {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if err != nil || time.Since(raw.Time) < ex.o.noSuchToolAfter {
			return // none left, or the oldest is still young (the rest are younger)
		}
		nm := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
		ce, err := events.DecodeCall(nm, int(ex.cfg.MaxMsgSize))
		def := tools.Definition{Name: tool}
		if tool == "" {
			def.Name = "_invalid"
		}
		j := &job{ce: ce, def: def, start: raw.Time,
			res: events.Result{Tool: tool, CallID: ce.ID, RunID: ce.RunIDOrSelf(), Executor: ex.o.id}}
		j.afterStore = func() { _ = stream.DeleteMsg(ctx, raw.Sequence) }
		switch {
		case err != nil && ce.ID == "":
			ex.deadLetter(j, nm, 0, tools.AsError(err, tools.CodeInvalidEvent))
			_ = stream.DeleteMsg(ctx, raw.Sequence)
		case err != nil:
			ex.fail(j, tools.AsError(err, tools.CodeInvalidEvent))
		default:
			ex.fail(j, tools.Errorf(tools.CodeNoSuchTool,
				"no executor serves tool %q: it has not been in the catalog for the %s this call waited", tool, ex.o.noSuchToolAfter))
		}
		seq = raw.Sequence + 1
	}
}
