package planner

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// How streamed text is coalesced into text_delta events: a pending chunk goes out once
// it is deltaBytes long, or deltaInterval after the last text_delta of the step, so a
// step costs at most one event per deltaInterval (plus one per deltaBytes of text) however
// finely the provider splits its answer. The run's stored conversation is the final
// message, never the deltas: they are a preview for those following the run.
const (
	deltaInterval = 50 * time.Millisecond
	deltaBytes    = 1 << 10
)

// generate asks model for the step's answer, streaming it: text deltas are coalesced and
// announced as text_delta events, each tool call as tool_call_started once the stream
// has delivered it. The answer returned is the whole message, as Generate returns it.
func (p *Planner) generate(ctx context.Context, run *Run, model provider.Model, req provider.Request) (*provider.Response, error) {
	s := &deltaStream{p: p, ctx: ctx, run: run, step: run.Step}
	resp, err := model.Stream(ctx, req, s.add)
	s.close()
	return resp, err
}

// deltaStream turns a model's stream into the step's text_delta and tool_call_started
// events. The model calls add from its calling goroutine; a timer flushes text that waits
// longer than deltaInterval. Events go out in the order of the stream.
type deltaStream struct {
	p    *Planner
	ctx  context.Context
	run  *Run
	step int

	mu      sync.Mutex
	pending strings.Builder
	last    time.Time // when the last text_delta went out
	timer   *time.Timer
	index   int // text_delta events sent
	calls   int // tool calls announced
	closed  bool
}

func (s *deltaStream) add(d provider.Delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if d.Text != "" {
		s.pending.WriteString(d.Text)
		switch wait := deltaInterval - time.Since(s.last); {
		case s.pending.Len() >= deltaBytes || wait <= 0:
			s.flush()
		case s.timer == nil:
			s.timer = time.AfterFunc(wait, s.tick)
		}
	}
	if d.ToolCall != nil {
		s.flush() // the text before the call precedes it
		n := s.calls
		s.calls++
		s.p.emit(s.ctx, s.run, "tool_call_started", s.step, callID(s.run.ID, s.step, n), map[string]any{
			"tool": d.ToolCall.Name, "modelCallId": d.ToolCall.ID, "index": n})
	}
}

func (s *deltaStream) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if !s.closed {
		s.flush()
	}
}

// flush sends the pending text as one text_delta event. s.mu is held.
func (s *deltaStream) flush() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.pending.Len() == 0 {
		return
	}
	text := s.pending.String()
	s.pending.Reset()
	n := s.index
	s.index++
	s.last = time.Now()
	s.p.emitID(s.ctx, s.run, "text_delta", s.run.ID+"-text_delta-"+strconv.Itoa(s.step)+"-"+strconv.Itoa(n), s.step, "",
		map[string]any{"text": text, "index": n})
}

// close sends what is pending; later deltas (there are none once Stream returned) are
// dropped.
func (s *deltaStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flush()
	s.closed = true
}

// emitID is emit with the event id given: for events of which a step has several.
func (p *Planner) emitID(ctx context.Context, run *Run, what, id string, step int, call string, detail any) {
	msg, err := events.NewRunEventID(p.cfg.Source, what, id,
		events.RunEvent{RunID: run.ID, Tenant: run.Tenant, Step: step, CallID: call, Detail: jsonText(detail)}, p.cfg.Now())
	p.sendRunEvent(ctx, run, what, msg, err)
}
