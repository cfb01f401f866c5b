package runstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Log is the run log: what a run accumulates, written once on the journal (the runs
// bucket's stream, events.StreamJournal), one subject per record:
//
//	toolfleet.runlog.<run>.input              the messages the run started with
//	toolfleet.runlog.<run>.step.<n>           step n: the model's message, the calls it made
//	                                          (calls the planner answered itself with their
//	                                          answers), how step n-1's calls ended, and the
//	                                          control state the step left; the step whose
//	                                          answer completes the run has none (the control
//	                                          state holds the answer)
//	toolfleet.runlog.<run>.args.<attempt>.<i> the arguments of tool call i of a step whose
//	                                          arguments are too large to share its record
//	toolfleet.runlog.<run>.msg.<k>            messages added after the start ([MessageRecord])
//
// A record is published with Nats-Expected-Last-Subject-Sequence: 0, so the first writer
// wins: two replicas taking the same step (a redelivery) may both ask the model, but only
// one answer is recorded, and the compare-and-set that makes it part of the run applies
// the recorded one, whichever replica does it; on a replicated journal a step's record
// and that compare-and-set are one atomic batch ([Store.UpdateWith]). Tool outputs are
// not copied here: they are the results the executors stored in the results stream, read by call id.
type Log struct {
	js jetstream.JetStream
	// win is the planner's window of asynchronous publishes (its admission.go).
	win     *jsutil.Window
	log     jetstream.Stream
	results []jetstream.Stream // one per shard: shards.ResultShard picks
	shards  events.Config
	// payloads reads outputs the executors stored by reference, and stores arguments
	// larger than claimCheck (args.go).
	payloads   *jsutil.Payloads
	claimCheck int

	// wrote, when set, is told the size of every record written (tests).
	Wrote func(subject string, n int)

	mu   sync.Mutex
	runs map[string]*runCache
}

// runCache is what a replica remembers of a run it works on, so that a step costs no
// read of the log: the conversation up to the last recorded step whose calls have
// ended, the records since, and the outputs of the current step's calls as their
// results came in. It is a cache: the log is the truth, and anything missing is read.
type runCache struct {
	input   []provider.Message
	msgs    []provider.Message // the conversation covering records 0..covered-1
	covered int
	recs    map[int]*StepRecord
	outputs map[string]json.RawMessage
	outStep int // the step whose outputs are kept
	seen    int // the message records msgs covers
	injects map[int]*MessageRecord
}

// maxCachedConversations bounds the runs whose conversation one replica remembers; past
// it, the cache starts over (the log is the truth).
const maxCachedConversations = 1024

// StepRecord is one step of a run as the run log keeps it.
type StepRecord struct {
	Step int `json:"step"`
	// Message is the model's answer. Its tool calls' arguments are absent when ArgsRef is
	// set: each is then in its own args record.
	Message provider.Message `json:"message"`
	ArgsRef string           `json:"argsRef,omitempty"`
	// Calls are the calls the model made at this step, as they were made: validated
	// arguments (absent when they are the message's), and the planner's own answer for
	// calls it answered itself.
	Calls []*runrec.CallRecord `json:"calls,omitempty"`
	// Closed are the calls of the step before, as they ended (no arguments, no outputs).
	Closed   []*runrec.CallRecord `json:"closed,omitempty"`
	Offered  *runrec.StepTools    `json:"offered,omitempty"`
	Warnings []string             `json:"warnings,omitempty"`
	// Retried: the model answered without a call under toolChoice required and was told so.
	Retried bool `json:"retried,omitempty"`
	// Seen is how many message records added after the run's start (follow-ups,
	// reminders: toolfleet.runlog.<run>.msg.<k>) the model saw at this step: they come
	// before the step's message in the conversation.
	Seen int `json:"seen,omitempty"`
	// State is the control state the step leaves, as the compare-and-set stores it.
	State *runrec.Run `json:"state"`
}

// argsRecord holds the arguments of one tool call when they are too large to share the
// Step record: the model's, and the validated ones when they differ.
type argsRecord struct {
	Model     json.RawMessage `json:"model"`
	Validated json.RawMessage `json:"validated,omitempty"`
	// ModelRef, instead of Model, points at the model's arguments when they are over
	// the claim-check size (args.go).
	ModelRef *events.PayloadRef `json:"modelRef,omitempty"`
}

// inlineArgsMax is the size of a step's arguments above which each goes in its own
// record, so that a step of several large calls stays under the server's max payload.
const inlineArgsMax = 64 << 10

// RetryNudge is what the model is told when it answered without a call under
// toolChoice required.
const RetryNudge = "toolChoice is required: answer by calling one of the offered tools, not in text."

// NewLog opens the run log of the journal and the results streams of cfg; win is the
// window of the planner's asynchronous publishes, which the log's writes go through.
func NewLog(ctx context.Context, js jetstream.JetStream, cfg events.Config, win *jsutil.Window) (*Log, error) {
	log, err := js.Stream(ctx, events.StreamJournal) // made by jsutil.EnsurePlanner
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", events.StreamJournal, err)
	}
	var results []jetstream.Stream // one per shard
	for _, name := range cfg.ResultStreams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		results = append(results, s)
	}
	return &Log{js: js, win: win, log: log, results: results, shards: cfg, payloads: jsutil.NewPayloads(js, cfg),
		claimCheck: cfg.WithDefaults().ClaimCheckBytes, runs: map[string]*runCache{}}, nil
}

// JournalConfig is the journal's configuration as the log last read it.
func (l *Log) JournalConfig() jetstream.StreamConfig { return l.log.CachedInfo().Config }

// Subject is the subject of run's record of kind (input; step, n; msg, k; args, ref,
// i) on the journal.
func Subject(run string, kind ...string) string {
	s := "toolfleet.runlog." + run
	for _, k := range kind {
		s += "." + k
	}
	return s
}

// putOnce writes a record to subject unless one is there. It reports whether this
// write stored it. While a replicated stream is still storing another write of the
// subject (two requests racing for the same record), it waits for that one to settle.
func (l *Log) putOnce(ctx context.Context, subject string, v any) (bool, error) {
	msg, err := l.record(subject, v)
	if err != nil {
		return false, err
	}
	return l.putMsgOnce(ctx, msg)
}

// putMsgOnce is putOnce of msg, a record made by [Log.record].
func (l *Log) putMsgOnce(ctx context.Context, msg *nats.Msg) (bool, error) {
	if _, err := jsutil.PublishSettled(ctx, l.js, msg); err != nil {
		if jsutil.IsAlreadyAnswered(err) {
			return false, nil
		}
		return false, fmt.Errorf("write %s (%d bytes): %w", msg.Subject, len(msg.Data), err)
	}
	return true, nil
}

// record is v as the record on subject, to be stored only if the subject has none
// (Nats-Expected-Last-Subject-Sequence: 0); its size is told to l.Wrote.
func (l *Log) record(subject string, v any) (*nats.Msg, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if l.Wrote != nil {
		l.Wrote(subject, len(b))
	}
	msg := nats.NewMsg(subject)
	msg.Data = b
	msg.Header.Set(events.HeaderExpectedLastSubjectSeq, "0")
	return msg, nil
}

// get reads the record on subject into v; ErrNoRecord when there is none.
func (l *Log) get(ctx context.Context, stream jetstream.Stream, subject string, v any) error {
	m, err := l.last(ctx, stream, subject)
	if err != nil {
		return fmt.Errorf("read %s: %w", subject, err)
	}
	if m == nil {
		return ErrNoRecord
	}
	if err := json.Unmarshal(m.Data, v); err != nil {
		return fmt.Errorf("decode %s: %w", subject, err)
	}
	return nil
}

// ErrNoRecord: the run log has no such record (expired, or never stored).
var ErrNoRecord = errors.New("no such record")

// last reads the last message on subject of stream (nil when there is none) with a
// direct get, which any replica of a replicated stream may answer: a miss is confirmed
// by the stream's leader, since a follower may not have stored yet what the leader
// acknowledged (a record another replica just wrote, or whose write was just refused
// because it was there).
func (l *Log) last(ctx context.Context, stream jetstream.Stream, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return jsutil.LeaderGetLast(ctx, l.js.Conn(), stream.CachedInfo().Config.Name, subject)
	}
	return m, err
}

// cache returns the replica's cache of run, creating it.
func (l *Log) cache(run string) *runCache {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.runs[run]
	if c == nil {
		if len(l.runs) >= maxCachedConversations {
			clear(l.runs)
		}
		c = &runCache{recs: map[int]*StepRecord{}, outputs: map[string]json.RawMessage{}, injects: map[int]*MessageRecord{}}
		l.runs[run] = c
	}
	return c
}

// Forget drops what this replica remembers of run.
func (l *Log) Forget(run string) {
	l.mu.Lock()
	delete(l.runs, run)
	l.mu.Unlock()
}

// WriteInput starts writing the messages a run starts with and returns a function that
// waits for the write's outcome (nil too when an earlier start wrote them). An error
// now is one no retry fixes, such as an input over the server's max payload, or ctx's
// end while the planner waited for room to publish.
func (l *Log) WriteInput(ctx context.Context, run string, msgs []provider.Message) (wait func(context.Context) error, err error) {
	subject := Subject(run, "input")
	msg, err := l.record(subject, msgs)
	if err != nil {
		return nil, err
	}
	f, err := l.win.Publish(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("write %s (%d bytes): %w", subject, len(msg.Data), err)
	}
	return func(ctx context.Context) error {
		// No answer (a server that died or is slow), a stream electing: published again
		// until settled; the record there already is an earlier try's.
		if err := jsutil.Settle(ctx, l.js, f, TryTimeout); err != nil && !jsutil.IsAlreadyAnswered(err) {
			return fmt.Errorf("write %s: %w", subject, err)
		}
		c := l.cache(run)
		l.mu.Lock()
		c.input = msgs
		l.mu.Unlock()
		return nil
	}, nil
}

// KeepInput remembers the input of run, being written, for its first step taken
// meanwhile (firststep.go).
func (l *Log) KeepInput(run string, msgs []provider.Message) {
	c := l.cache(run)
	l.mu.Lock()
	c.input = msgs
	l.mu.Unlock()
}

// Input returns the messages run started with.
func (l *Log) Input(ctx context.Context, run string) ([]provider.Message, error) {
	c := l.cache(run)
	l.mu.Lock()
	in := c.input
	l.mu.Unlock()
	if in != nil {
		return in, nil
	}
	if err := l.get(ctx, l.log, Subject(run, "input"), &in); err != nil {
		return nil, err
	}
	l.mu.Lock()
	c.input = in
	l.mu.Unlock()
	return in, nil
}

// WriteStep records step rec.Step of run, unless a record of that step is there: then it
// returns that one, which is the step as it happened.
func (l *Log) WriteStep(ctx context.Context, run string, rec *StepRecord) (*StepRecord, error) {
	msg, err := l.StepMessage(ctx, run, rec)
	if err != nil {
		return nil, err
	}
	ok, err := l.putMsgOnce(ctx, msg)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Another replica recorded the step first: its record is the step.
		return l.readStep(ctx, run, rec.Step)
	}
	l.KeepStep(run, rec)
	return rec, nil
}

// StepMessage is the record of step rec.Step of run, to be written once; arguments too
// large to share it are written first, each in its own record.
func (l *Log) StepMessage(ctx context.Context, run string, rec *StepRecord) (*nats.Msg, error) {
	if err := l.storeLargeArguments(ctx, rec); err != nil {
		return nil, err
	}
	stored := *rec
	size := 0
	for _, tc := range rec.Message.ToolCalls {
		size += len(tc.Arguments)
	}
	if size > inlineArgsMax || l.hasLargeArguments(rec) {
		// Each call's arguments in its own record, under a name no other attempt uses.
		stored.ArgsRef = nuid.Next()
		stored.Message.ToolCalls = append([]provider.ToolCall(nil), rec.Message.ToolCalls...)
		stored.Calls = make([]*runrec.CallRecord, len(rec.Calls))
		futures := make([]jetstream.PubAckFuture, 0, len(rec.Message.ToolCalls))
		for i, tc := range rec.Message.ToolCalls {
			var made *runrec.CallRecord
			if i < len(rec.Calls) {
				made = rec.Calls[i]
			}
			a, err := l.argsRecordOf(ctx, rec.State.Tenant, tc, made)
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(a)
			if err != nil {
				return nil, err
			}
			subject := Subject(run, "args", stored.ArgsRef, strconv.Itoa(i))
			if l.Wrote != nil {
				l.Wrote(subject, len(b))
			}
			f, err := l.win.Publish(ctx, &nats.Msg{Subject: subject, Data: b})
			if err != nil {
				return nil, fmt.Errorf("write arguments of step %d (%d bytes): %w", rec.Step, len(b), err)
			}
			futures = append(futures, f)
			stored.Message.ToolCalls[i].Arguments = nil
		}
		for i, c := range rec.Calls {
			cc := *c
			cc.Arguments = nil
			stored.Calls[i] = &cc
		}
		for _, f := range futures {
			// Each on a subject of its own: published again, it is the same record.
			if err := jsutil.Settle(ctx, l.js, f, TryTimeout); err != nil {
				return nil, fmt.Errorf("write arguments of step %d: %w", rec.Step, err)
			}
		}
	} else {
		stored.Calls = make([]*runrec.CallRecord, len(rec.Calls))
		for i, c := range rec.Calls {
			cc := *c
			if i < len(rec.Message.ToolCalls) && bytes.Equal(cc.Arguments, rec.Message.ToolCalls[i].Arguments) {
				cc.Arguments = nil
			}
			stored.Calls[i] = &cc
		}
	}
	return l.record(Subject(run, "step", strconv.Itoa(rec.Step)), &stored)
}

// KeepStep remembers record rec of run, which this replica wrote.
func (l *Log) KeepStep(run string, rec *StepRecord) {
	c := l.cache(run)
	l.mu.Lock()
	c.recs[rec.Step] = rec
	l.mu.Unlock()
}

// Known reports whether this replica has record n of run in its cache.
func (l *Log) Known(run string, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.runs[run]
	return c != nil && c.recs[n] != nil
}

// Step returns record n of run, with its arguments, from the cache or the log.
func (l *Log) Step(ctx context.Context, run string, n int) (*StepRecord, error) {
	c := l.cache(run)
	l.mu.Lock()
	rec := c.recs[n]
	l.mu.Unlock()
	if rec != nil {
		return rec, nil
	}
	return l.readStep(ctx, run, n)
}

// readStep reads record n of run from the log, with its arguments, and caches it.
func (l *Log) readStep(ctx context.Context, run string, n int) (*StepRecord, error) {
	rec, err := l.loadStep(ctx, run, n, true)
	if err != nil {
		return nil, err
	}
	l.KeepStep(run, rec)
	return rec, nil
}

// loadStep reads record n of run from the log, with its arguments; with its State only
// when withState (decoding it is most of a record's cost).
func (l *Log) loadStep(ctx context.Context, run string, n int, withState bool) (*StepRecord, error) {
	subject := Subject(run, "step", strconv.Itoa(n))
	m, err := l.last(ctx, l.log, subject)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	if m == nil {
		return nil, ErrNoRecord
	}
	return l.decodeStep(ctx, run, n, m.Data, withState)
}

// decodeStep decodes data, record n of run, and reads its arguments when they are in
// records of their own; its State only when withState.
func (l *Log) decodeStep(ctx context.Context, run string, n int, data []byte, withState bool) (*StepRecord, error) {
	var rec StepRecord
	var dst any = &rec
	if !withState {
		dst = &struct {
			*StepRecord
			State json.RawMessage `json:"state"` // shadows rec.State: checked, not decoded
		}{StepRecord: &rec}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return nil, fmt.Errorf("decode %s: %w", Subject(run, "step", strconv.Itoa(n)), err)
	}
	for i := range rec.Message.ToolCalls {
		tc := &rec.Message.ToolCalls[i]
		var a argsRecord
		if rec.ArgsRef != "" {
			if err := l.get(ctx, l.log, Subject(run, "args", rec.ArgsRef, strconv.Itoa(i)), &a); err != nil {
				return nil, fmt.Errorf("arguments of call %d of step %d: %w", i, n, err)
			}
			tc.Arguments = a.Model
			var made *runrec.CallRecord
			if i < len(rec.Calls) {
				made = rec.Calls[i]
			}
			if err := l.readArguments(ctx, a, tc, made); err != nil {
				return nil, fmt.Errorf("arguments of call %d of step %d: %w", i, n, err)
			}
		}
		if i < len(rec.Calls) && rec.Calls[i].Arguments == nil {
			rec.Calls[i].Arguments = tc.Arguments
			if a.Validated != nil {
				rec.Calls[i].Arguments = a.Validated
			}
		}
	}
	rec.ArgsRef = ""
	return &rec, nil
}

// KeepOutput remembers the output of a call of run whose result came in on this replica,
// for the conversation of the next step.
func (l *Log) KeepOutput(run string, step int, call string, out json.RawMessage) {
	c := l.cache(run)
	l.mu.Lock()
	if c.outStep != step { // only the current step's: another replica may take the steps
		clear(c.outputs)
		c.outStep = step
	}
	c.outputs[call] = out
	l.mu.Unlock()
}

// Output returns the output of fleet call c of run (a run of tenant): from the cache, or
// from the result the executor stored (nil when there is none any more).
func (l *Log) Output(ctx context.Context, tenant, run string, c *runrec.CallRecord) (json.RawMessage, error) {
	cache := l.cache(run)
	l.mu.Lock()
	out, ok := cache.outputs[c.ID]
	l.mu.Unlock()
	if ok {
		return out, nil
	}
	subj, err := events.ResultSubject(tenant, run, c.ID)
	if err != nil {
		return nil, err
	}
	m, err := l.last(ctx, l.results[l.shards.ResultShard(subj)], subj)
	if err != nil {
		return nil, fmt.Errorf("read result of call %s: %w", c.ID, err)
	}
	if m == nil {
		return nil, nil
	}
	_, res, err := events.DecodeResult(rawMsg{m})
	if err != nil {
		return nil, fmt.Errorf("decode result of call %s: %w", c.ID, err)
	}
	if err := l.Resolve(ctx, &res); err != nil {
		return nil, err
	}
	return res.Output, nil
}

// rawMsg gives a stored message the shape events.Decode reads.
type rawMsg struct{ m *jetstream.RawStreamMsg }

func (r rawMsg) Data() []byte         { return r.m.Data }
func (r rawMsg) Headers() nats.Header { return r.m.Header }
func (r rawMsg) Subject() string      { return r.m.Subject }

// history is a run's steps as recorded: records 0..Recorded-1, and every call with the
// state it ended in (or is in).
type history struct {
	recs  []*StepRecord
	final map[string]*runrec.CallRecord // by call id: the call's latest state
}

// history reads records 0..r.Recorded-1 of the run r (its control state).
func (l *Log) history(ctx context.Context, r *runrec.Run, from int) (*history, error) {
	h := &history{final: map[string]*runrec.CallRecord{}}
	for n := from; n < r.Recorded; n++ {
		rec, err := l.Step(ctx, r.ID, n)
		if err != nil {
			return nil, fmt.Errorf("step %d of run %s: %w", n, r.ID, err)
		}
		h.recs = append(h.recs, rec)
		for _, c := range rec.Closed {
			h.final[c.ID] = c
		}
	}
	for _, c := range r.Calls {
		h.final[c.ID] = c
	}
	return h, nil
}

// calls returns the calls of rec in their latest state, with arguments, and whether all
// of them have ended.
func (h *history) calls(rec *StepRecord) ([]*runrec.CallRecord, bool) {
	out := make([]*runrec.CallRecord, len(rec.Calls))
	done := true
	for i, made := range rec.Calls {
		c := *made
		if f := h.final[made.ID]; f != nil {
			c = *f
			if c.Arguments == nil {
				c.Arguments = made.Arguments
			}
			if c.Local {
				c.Output = made.Output
			}
			if c.Approval != nil && len(c.Approval.ArgumentsApproved) > 0 && c.ArgumentsOriginal == nil {
				c.ArgumentsOriginal = made.Arguments
			}
		}
		done = done && c.Done()
		out[i] = &c
	}
	return out, done
}

// Conversation returns the messages to send the model at the run's current step: the
// input, then per recorded step the model's message, the nudge of a retried step, and
// the results of its calls (each output within the run's context budget). Every call of
// the recorded steps has ended when a step is taken.
func (l *Log) Conversation(ctx context.Context, r *runrec.Run) ([]provider.Message, error) {
	c := l.cache(r.ID)
	l.mu.Lock()
	msgs, covered, seen := c.msgs, c.covered, c.seen
	l.mu.Unlock()
	if msgs == nil || covered > r.Recorded {
		in, err := l.Input(ctx, r.ID)
		if err != nil {
			return nil, fmt.Errorf("input of run %s: %w", r.ID, err)
		}
		msgs, covered, seen = in, 0, 0
	}
	h, err := l.history(ctx, r, covered)
	if err != nil {
		return nil, err
	}
	msgs = msgs[:len(msgs):len(msgs)] // appends copy: the cached slice is shared
	for _, rec := range h.recs {
		calls, done := h.calls(rec)
		if !done {
			return nil, fmt.Errorf("run %s: step %d has calls without results", r.ID, rec.Step)
		}
		if msgs, seen, err = l.ModelInjected(ctx, r.ID, msgs, seen, rec.Seen); err != nil {
			return nil, err
		}
		if m, err := l.stepMessages(ctx, r, rec, calls); err != nil {
			return nil, err
		} else {
			msgs = append(msgs, m...)
		}
	}
	l.mu.Lock()
	c.msgs, c.covered, c.seen = msgs, r.Recorded, seen
	clear(c.outputs)
	l.mu.Unlock()
	l.prune(r.ID, r.Recorded-1)
	// Messages added since the last recorded step come before this one.
	msgs, _, err = l.ModelInjected(ctx, r.ID, msgs, seen, r.Injected)
	return msgs, err
}

// prune forgets the cached records of run before step from: the next step needs only
// the last one (its calls' arguments).
func (l *Log) prune(run string, from int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.runs[run]; c != nil {
		for n := range c.recs {
			if n < from {
				delete(c.recs, n)
			}
		}
	}
}

// stepMessages returns the messages step rec adds to the conversation, given its calls.
func (l *Log) stepMessages(ctx context.Context, r *runrec.Run, rec *StepRecord, calls []*runrec.CallRecord) ([]provider.Message, error) {
	out := []provider.Message{ModelMessage(rec, r.Limits.ContextBytes())}
	if rec.Retried {
		out = append(out, provider.Message{Role: provider.RoleUser, Text: RetryNudge})
	}
	if len(calls) == 0 {
		return out, nil
	}
	tool := provider.Message{Role: provider.RoleTool}
	for _, c := range calls {
		content, err := l.callOutput(ctx, r, c)
		if err != nil {
			return nil, err
		}
		tool.ToolResults = append(tool.ToolResults, provider.ToolResult{
			CallID: c.ModelCallID, Name: c.Name, Content: withinBudget(content, c.ID, r.Limits.ContextBytes()), IsError: c.Failed()})
	}
	return append(out, tool), nil
}

// callOutput returns what the model is given for the ended call c: its output, else its
// error, else null.
func (l *Log) callOutput(ctx context.Context, r *runrec.Run, c *runrec.CallRecord) (json.RawMessage, error) {
	out := c.Output
	if !c.Local && out == nil {
		var err error
		if out, err = l.Output(ctx, r.Tenant, r.ID, c); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 && c.Error != nil {
		out = c.Error.ForModel()
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	return out, nil
}

// Assemble fills the control state r with what the run log and the results stream hold:
// the conversation, every call with its arguments and output, the tool sets, warnings
// and retries of every step, and the answer of a final tool.
func (l *Log) Assemble(ctx context.Context, r *runrec.Run) (*runrec.Run, error) {
	in, err := l.Input(ctx, r.ID)
	if err != nil && !errors.Is(err, ErrNoRecord) {
		return nil, err
	}
	h, err := l.history(ctx, r, 0)
	if err != nil {
		return nil, err
	}
	out := *r
	out.Messages = append([]provider.Message(nil), in...)
	out.Calls, out.Offered, out.Warnings, out.RetriedSteps = nil, nil, nil, nil
	seen := 0
	for _, rec := range h.recs {
		calls, done := h.calls(rec)
		for _, c := range calls {
			if c.Done() {
				if c.Output, err = l.callOutput(ctx, r, c); err != nil {
					return nil, err
				}
			}
			if c.ID == r.AnswerCall {
				out.Answer = string(c.Output)
			}
		}
		out.Calls = append(out.Calls, calls...)
		if rec.Offered != nil {
			out.Offered = append(out.Offered, *rec.Offered)
		}
		out.Warnings = append(out.Warnings, rec.Warnings...)
		if rec.Retried {
			out.RetriedSteps = append(out.RetriedSteps, rec.Step)
		}
		if out.Messages, seen, err = l.Injected(ctx, r.ID, out.Messages, seen, rec.Seen); err != nil {
			return nil, err
		}
		if !done { // the current step: its results are not fed back yet
			out.Messages = append(out.Messages, ModelMessage(rec, r.Limits.ContextBytes()))
			continue
		}
		m, err := l.stepMessages(ctx, r, rec, calls)
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, m...)
	}
	if r.Status == runrec.StatusDone && r.Termination == runrec.TerminationCompleted && r.Recorded <= r.Step {
		// The step that answered has no record: its message is the answer, its tool set
		// the control state's.
		if out.Messages, seen, err = l.Injected(ctx, r.ID, out.Messages, seen, r.Seen); err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, provider.Message{Role: provider.RoleAssistant, Text: r.Answer})
		if n := len(r.Offered); n > 0 && r.Offered[n-1].Step == r.Step {
			out.Offered = append(out.Offered, r.Offered[n-1])
		}
	}
	if out.Messages, _, err = l.Injected(ctx, r.ID, out.Messages, seen, r.Injected); err != nil {
		return nil, err
	}
	if r.Status == runrec.StatusDone {
		l.Forget(r.ID) // nothing to cache for a run that ended
	} else {
		l.prune(r.ID, r.Recorded-1)
	}
	return &out, nil
}

// Resolve reads an output stored by reference into res.Output: the run keeps it, and
// the model sees it within the run's context budget like any output.
func (l *Log) Resolve(ctx context.Context, res *events.Result) error {
	if res.OutputRef == nil {
		return nil
	}
	out, err := l.payloads.Get(ctx, res.OutputRef, 0)
	if err != nil {
		return fmt.Errorf("read the output of call %s: %w", res.CallID, err)
	}
	res.Output = out
	return nil
}
