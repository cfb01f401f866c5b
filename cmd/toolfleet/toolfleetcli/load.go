package toolfleetcli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/loadgen"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// loadSummary is the load's report and what the results said.
type loadSummary struct {
	loadgen.Report
	calls                        int
	retries, failures, undecoded int
	byStatus                     map[string]int
}

// load publishes o.Calls calls of the built-in tools (echo, calculator, sleep 0) as call
// events with at most 256 in flight, with internal/loadgen as the executor's benchmark
// does: each timed from publish to its result stored in JetStream, and counted per call
// id so that a lost or doubled result shows.
func load(ctx context.Context, f *Fleet, o DemoOptions) (loadSummary, error) {
	run := "load-" + nuid.Next()
	filter, err := events.RunResultsSubject("", run)
	if err != nil {
		return loadSummary{}, err
	}
	sum := loadSummary{calls: o.Calls, byStatus: map[string]int{}}
	var mu sync.Mutex
	g, err := loadgen.Start(ctx, f.NC, loadgen.Config{ReplyStreams: []string{events.StreamResults}, ReplyFilter: filter,
		Window: 256, StallTimeout: o.StallTimeout,
		OnReply: func(_ string, m jetstream.Msg) {
			_, res, err := events.DecodeResult(m)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				sum.undecoded++
				return
			}
			sum.byStatus[string(res.Status)]++
			sum.retries += max(res.Attempts-1, 0)
			if res.Status != events.StatusOK {
				sum.failures++
			}
		}})
	if err != nil {
		return sum, err
	}
	defer g.Stop()

	bar := newProgress(o.Progress, o.ProgressTTY, o.Calls)
	stopBar := make(chan struct{})
	barDone := make(chan struct{})
	go func() {
		defer close(barDone)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				bar.show(g.Answered())
			case <-stopBar:
				bar.show(g.Answered())
				bar.done()
				return
			}
		}
	}()
	finishBar := sync.OnceFunc(func() { close(stopBar); <-barDone })
	defer finishBar()

	for i := range o.Calls {
		tool, args := loadCall(i)
		msg, err := events.NewCall(events.CallOptions{Source: "/toolfleet/demo", ID: fmt.Sprintf("%s-%d", run, i), RunID: run}, events.Call{Tool: tool, Arguments: args})
		if err != nil {
			return sum, err
		}
		if err := g.Publish(ctx, msg); err != nil {
			return sum, err
		}
	}
	rep, err := g.Wait(ctx)
	if err != nil {
		return sum, err
	}
	finishBar()
	if rep.PublishErrors > 0 {
		return sum, fmt.Errorf("%d of %d calls were refused by JetStream: %w", rep.PublishErrors, o.Calls, g.FirstPublishError())
	}
	// A late reply of a call counted lost could still arrive: hand back a copy.
	mu.Lock()
	defer mu.Unlock()
	out := sum
	out.Report = rep
	out.byStatus = maps.Clone(sum.byStatus)
	return out, nil
}

// loadCall is the i-th call of the load: mostly echo, with calculator and sleep 0 mixed in.
func loadCall(i int) (string, json.RawMessage) {
	switch i % 4 {
	case 1:
		return "calculator", json.RawMessage(fmt.Sprintf(`{"expression":"%d * 2 + 1"}`, i))
	case 3:
		return "sleep", json.RawMessage(`{"duration":"0s"}`)
	}
	return "echo", json.RawMessage(fmt.Sprintf(`{"value":{"n":%d}}`, i))
}
