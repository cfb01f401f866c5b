package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run events of the calls an executor runs. When an attempt has run for the executor's
// startedAfter (WithStartedAfter; 20ms by default, 0: at once), or reports progress
// before, the executor announces it on the call's run: tool_started on
// toolfleet.event.run.<run>.tool_started (RunEvent: run, call, tool, executor, attempt;
// the event's time is when it started). A quicker call is not announced — its result
// says when it started — which spares the events stream a message per call.
// While it runs, what the tool reports with tools.ReportProgress is published as
// tool_progress (Detail: the tools.Progress; Seq numbers them), at most one every
// progressEvery per attempt: a report within the interval is held back and the latest
// one is published when it ends (or when the attempt ends). Message and Data are
// scrubbed of the tool's secrets like its output.
//
// Both are published without waiting for JetStream's acknowledgement (a plain publish:
// the events stream stores it; nothing is retried): they are news for the run's
// followers, not part of the answer rule, and the call must not wait on them.

// progressEvery is the shortest interval between two progress events of an attempt.
const progressEvery = 100 * time.Millisecond

// Bounds of what a progress event carries: a longer message is cut, larger data left out.
const (
	maxProgressMessage = 1024
	maxProgressData    = 16 << 10
)

// attempt is one attempt of a call as its run's followers see it: its progress reports.
type attempt struct {
	ex *Executor
	j  *job
	n  int

	mu      sync.Mutex
	seq     int
	last    time.Time
	pending *tools.Progress
	timer   *time.Timer
	ended   bool
	// started is when the attempt started; announced, whether tool_started went out
	// (after the executor's startedAfter, or before the first progress report).
	started    time.Time
	announced  bool
	startTimer *time.Timer
	// fires counts the timers' functions set to run and not returned: end waits for
	// the ones it could not stop, so that none runs into the next attempt.
	fires sync.WaitGroup
}

// startAttempt starts attempt n of j: it is announced (tool_started) at once or once it
// has run for the executor's startedAfter, and ctx gets the attempt's progress reporter
// (j.attempt: attempts of a call run one after the other); j.attempt.end publishes a
// report held back and stops taking more.
func (ex *Executor) startAttempt(ctx context.Context, j *job, n int) context.Context {
	a := &j.attempt
	a.mu.Lock()
	a.ex, a.j, a.n, a.seq, a.last, a.pending, a.ended = ex, j, n, 0, time.Time{}, nil, false
	a.started, a.announced = time.Now(), false
	if ex.o.startedAfter <= 0 {
		a.announceLocked()
	} else {
		a.startTimer = a.after(ex.o.startedAfter, a.announce)
	}
	a.mu.Unlock()
	return tools.WithProgress(ctx, a)
}

// announce publishes tool_started, unless the attempt ended or was announced already.
func (a *attempt) announce() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ended && !a.announced {
		a.announceLocked()
	}
}

func (a *attempt) announceLocked() {
	a.announced = true
	a.publish("tool_started", nil, a.started)
}

// ReportProgress implements tools.ProgressReporter.
func (a *attempt) ReportProgress(p tools.Progress) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return
	}
	if wait := time.Until(a.last.Add(progressEvery)); wait > 0 {
		a.pending = &p
		if a.timer == nil {
			a.timer = a.after(wait, a.flush)
		}
		return
	}
	a.progressLocked(p)
}

// flush publishes the report held back.
func (a *attempt) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timer = nil
	if a.pending != nil && !a.ended {
		p := *a.pending
		a.pending = nil
		a.progressLocked(p)
	}
}

// after runs f after d on a timer's goroutine that end waits for; a.mu held.
func (a *attempt) after(d time.Duration, f func()) *time.Timer {
	a.fires.Add(1)
	return time.AfterFunc(d, func() {
		defer a.fires.Done()
		f()
	})
}

// end publishes the report held back, if any, and refuses later ones. It returns once
// the timers' functions have: one that fired meanwhile finds the attempt ended.
func (a *attempt) end() {
	a.mu.Lock()
	for _, t := range []**time.Timer{&a.startTimer, &a.timer} {
		if *t != nil && (*t).Stop() {
			a.fires.Done() // stopped before it fired: its function never runs
		}
		*t = nil
	}
	if a.pending != nil {
		p := *a.pending
		a.pending = nil
		a.progressLocked(p)
	}
	a.ended = true
	a.mu.Unlock()
	a.fires.Wait()
}

func (a *attempt) progressLocked(p tools.Progress) {
	if !a.announced { // a call's progress comes after its start
		a.announceLocked()
	}
	a.last = time.Now()
	a.seq++
	p = scrubProgress(a.ex.secrets[a.j.def.Name], p)
	detail, err := tools.MarshalJSON(p)
	if err != nil {
		return
	}
	a.publish("tool_progress", detail, a.last)
}

// publish sends the run event what of the attempt, of time at, without waiting for it
// to be stored.
func (a *attempt) publish(what string, detail json.RawMessage, at time.Time) {
	j := a.j
	r := events.RunEvent{RunID: j.res.RunID, Tenant: j.ce.Caller.Tenant, Tool: j.def.Name, CallID: j.res.CallID,
		Executor: a.ex.o.id, Attempt: a.n, Detail: detail}
	if what == "tool_progress" {
		r.Seq = a.seq
	}
	m, err := events.NewRunEvent(a.ex.source, what, r, at)
	if err == nil {
		j.carryTrace(m)
		err = a.ex.nc.PublishMsg(m)
	}
	if err != nil {
		a.ex.o.log.Debug().Err(err).Str("call_id", j.res.CallID).Str("event", what).Msg("run event not published")
	}
}

// scrubProgress removes the tool's secrets from a progress report and bounds it.
func scrubProgress(secrets tools.Secrets, p tools.Progress) tools.Progress {
	if len(p.Data) > 0 && !json.Valid(p.Data) {
		p.Data, _ = json.Marshal(string(p.Data)) // a string always marshals
	}
	if len(secrets) > 0 {
		p.Message = secrets.ScrubString(p.Message)
		if out := secrets.Scrub(p.Data); string(out) != string(p.Data) {
			if !json.Valid(out) {
				out, _ = json.Marshal(string(out)) // a string always marshals
			}
			p.Data = out
		}
	}
	if len(p.Message) > maxProgressMessage {
		p.Message = strings.ToValidUTF8(p.Message[:maxProgressMessage], "")
	}
	if len(p.Data) > maxProgressData {
		p.Data = nil
	}
	return p
}
