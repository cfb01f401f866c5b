package allinone

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/pkg/events"
)

type loadSummary struct {
	elapsed, p50, p99                time.Duration
	retries, failures, lost, doubled int
}

// load publishes o.Calls calls of the built-in tools (echo, calculator, sleep 0) with at
// most 256 in flight, and gathers their results from the results subject: latency from
// publish to result, and a count per call id to check none is lost or doubled.
func load(ctx context.Context, f *Fleet, o DemoOptions) (loadSummary, error) {
	js, err := jetstream.New(f.NC)
	if err != nil {
		return loadSummary{}, err
	}
	run := "load" + nuid.Next()[:8]
	var (
		mu       sync.Mutex
		sent     = make(map[string]time.Time, o.Calls)
		lat      = make([]time.Duration, 0, o.Calls)
		seen     = make(map[string]int, o.Calls)
		sum      loadSummary
		slots    = make(chan struct{}, 256)
		finished = make(chan struct{})
	)
	sub, err := f.NC.Subscribe("toolfleet.result."+run+".*", func(m *nats.Msg) {
		_, res, err := events.DecodeResult(m)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen[res.CallID]++
		if seen[res.CallID] > 1 {
			sum.doubled++
			return
		}
		lat = append(lat, time.Since(sent[res.CallID]))
		sum.retries += max(res.Attempts-1, 0)
		if res.Status != events.StatusOK {
			sum.failures++
		}
		<-slots
		if len(lat) == o.Calls {
			close(finished)
		}
	})
	if err != nil {
		return sum, err
	}
	defer func() { _ = sub.Unsubscribe() }()

	progress := newProgress(o, o.Calls)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	go func() {
		for i := range o.Calls {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			tool, args := loadCall(i)
			id := fmt.Sprintf("%s-%d", run, i)
			msg, err := events.NewCall("/toolfleet/demo", id, run, events.Call{Tool: tool, Arguments: args})
			if err != nil {
				continue
			}
			mu.Lock()
			sent[id] = time.Now()
			mu.Unlock()
			if _, err := js.PublishMsgAsync(msg); err != nil {
				continue
			}
		}
	}()
	timeout := time.After(2 * time.Minute)
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-tick.C:
			mu.Lock()
			progress.show(len(lat))
			mu.Unlock()
		case <-timeout:
			break wait
		case <-ctx.Done():
			return sum, ctx.Err()
		}
	}
	sum.elapsed = time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	progress.show(len(lat))
	progress.done()
	sum.lost = o.Calls - len(seen)
	slices.Sort(lat)
	if len(lat) > 0 {
		sum.p50 = lat[len(lat)*50/100]
		sum.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return sum, nil
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

// progress draws a bar in place on a terminal, or a line every 10% elsewhere (CI logs).
type progress struct {
	o        DemoOptions
	total    int
	lastTens int
}

func newProgress(o DemoOptions, total int) *progress {
	return &progress{o: o, total: total, lastTens: -1}
}

func (p *progress) show(n int) {
	if p.o.Progress == nil {
		return
	}
	if p.o.ProgressTTY {
		const width = 40
		filled := width * n / p.total
		fmt.Fprintf(p.o.Progress, "\r  [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, p.total)
		return
	}
	if tens := 10 * n / p.total; tens > p.lastTens {
		p.lastTens = tens
		fmt.Fprintf(p.o.Progress, "  %3d%% (%d/%d)\n", tens*10, n, p.total)
	}
}

func (p *progress) done() {
	if p.o.Progress != nil && p.o.ProgressTTY {
		fmt.Fprintln(p.o.Progress)
	}
}
