package plannerapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// echoScript is the agent loop of the side-by-side figures: an instant model turn that
// calls echo, then the answer.
const echoScript = `
steps:
  - calls: [{name: echo, arguments: {text: hi}}]
  - text: done
`

// syncAlwaysFleet is a planner API over a fleet whose server syncs every write to disk
// before acknowledging it (sync_interval: always, PostgreSQL's default durability), its
// model running echoScript: a server that falls behind a planner on 2 cores.
func syncAlwaysFleet(tb testing.TB) (*planner.Planner, *httptest.Server) {
	tb.Helper()
	f := plannertest.StartFleet(tb, natstest.StartWith(tb, func(o *server.Options) { o.SyncAlways = true }))
	models, def := plannertest.Models(tb, map[string]string{"main": echoScript})
	p, err := planner.New(f.Ctx, f.Srv.Connect(), planner.Config{Models: models, DefaultModel: def, Events: f.Cfg, Log: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	plannertest.Serve(tb, p.Run)
	natstest.Eventually(tb, waitTimeout, "the planner's catalog to list echo", func() bool { _, ok := p.Tool("echo"); return ok })
	srv := httptest.NewServer(Handler(p, Auth{}))
	tb.Cleanup(srv.Close)
	return p, srv
}

// statusCounter counts the HTTP statuses a client was answered, retries included.
type statusCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[int]int
}

func (s *statusCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if err == nil {
		s.mu.Lock()
		s.seen[resp.StatusCode]++
		s.mu.Unlock()
	}
	return resp, err
}

// loadReport is what driveRuns saw.
type loadReport struct {
	statuses map[int]int // every answer, retried 429s included
	runs     []*runs.Run // the runs as their start answered them
	errs     []error     // starts that failed, after the client's retries
	elapsed  time.Duration
	lat      []time.Duration // each start, from the first request to its answer, sorted
}

func (r loadReport) p(q float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(int(q*float64(len(r.lat))), len(r.lat)-1)]
}

// driveRuns starts n runs of echo through url's API, inFlight at a time, each with
// "wait" and the runs client's retries: what a user of the API runs.
func driveRuns(ctx context.Context, url string, n, inFlight int) loadReport {
	sc := &statusCounter{next: http.DefaultTransport, seen: map[int]int{}}
	c, err := runs.New(url, runs.WithHTTPClient(&http.Client{Transport: sc}), runs.WithRetries(100))
	if err != nil {
		panic(err) // a literal URL of httptest
	}
	var mu sync.Mutex
	rep := loadReport{}
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			run, err := c.Start(ctx, runs.StartRequest{Input: "hi", Tools: []string{"echo"}, Wait: true})
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.errs = append(rep.errs, err)
				return
			}
			rep.runs = append(rep.runs, run)
			rep.lat = append(rep.lat, d)
		})
	}
	wg.Wait()
	rep.elapsed = time.Since(start)
	slices.Sort(rep.lat)
	rep.statuses = sc.seen
	return rep
}

// Under a server that falls behind (every write synced to disk), runs started at 64 in
// flight through the HTTP API all complete: every start is answered 200 — or 429 while
// the planner is saturated, which the client retries until it gets 200 — never 500
// (before backpressure, 4–30% of 1,200 were "stalled with too many outstanding async
// published messages"), and every run's record ends completed.
func TestSlowServerRunsAllComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 1,200 runs")
	}
	n := 1200
	if raceDetector {
		n = 400 // as slow as 1,200 without it
	}
	p, srv := syncAlwaysFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep := driveRuns(ctx, srv.URL, n, 64)
	t.Logf("answers %v in %s; start-to-done p50 %s, p99 %s", rep.statuses, rep.elapsed, rep.p(0.5), rep.p(0.99))
	if len(rep.errs) > 0 {
		t.Fatalf("%d of %d runs failed to start; the first: %v", len(rep.errs), n, rep.errs[0])
	}
	for status, n := range rep.statuses {
		if status != http.StatusOK && status != http.StatusTooManyRequests {
			t.Errorf("%d answers were %d", n, status)
		}
	}
	for _, r := range rep.runs {
		stored, err := p.Get(ctx, r.ID)
		if err != nil {
			t.Fatalf("run %s: %v", r.ID, err)
		}
		if stored.Status != planner.StatusDone || stored.Termination != planner.TerminationCompleted || stored.Answer != "done" {
			t.Errorf("run %s ended %s %s (%s), answer %q; want done completed", r.ID, stored.Status, stored.Termination, stored.Detail, stored.Answer)
		}
	}
}

// BenchmarkSlowServerRuns is TestSlowServerRunsAllComplete's load at b.N runs (the
// side-by-side figure is -benchtime 3000x): runs per second, start-to-done p50 and p99,
// and the answers by status (500s: runs that failed because the server was slow).
func BenchmarkSlowServerRuns(b *testing.B) {
	_, srv := syncAlwaysFleet(b)
	ctx := context.Background()
	b.ResetTimer()
	rep := driveRuns(ctx, srv.URL, b.N, 64)
	b.StopTimer()
	b.ReportMetric(float64(len(rep.runs))/rep.elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(rep.p(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(rep.p(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(rep.statuses[http.StatusTooManyRequests]), "429s")
	b.ReportMetric(float64(rep.statuses[http.StatusInternalServerError]), "500s")
	b.ReportMetric(float64(len(rep.errs)), "failed-runs")
}

// A planner at its limit of runs being started answers a new start 429, with
// Retry-After and the API's JSON error (as the OpenAPI document describes it), counts
// it, and stores nothing of it; once the start under way is through, the next is
// admitted. The start under way is held by its server: the planner's connection goes
// through a proxy that holds the server's answers.
func TestSaturatedPlannerAnswers429(t *testing.T) {
	f := plannertest.StartFleet(t, natstest.Start(t))
	proxy := nettest.NewProxy(t, f.Srv.Server().Addr().String())
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	models, def := plannertest.Models(t, map[string]string{"main": answerScript})
	reg := prometheus.NewRegistry()
	p, err := planner.New(f.Ctx, nc, planner.Config{Models: models, DefaultModel: def, Events: f.Cfg, Log: zerolog.Nop(),
		MaxStarting: 1, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	plannertest.Serve(t, p.Run)
	rec := &recorder{next: Handler(p, Auth{})}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	// The first start takes the one place and waits for its server.
	proxy.Hold()
	writing := proxy.Sent("toolfleet.runlog.")
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(`{"input":"first"}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	select {
	case <-writing:
	case <-time.After(waitTimeout):
		t.Fatal("the first start wrote nothing")
	}

	resp, err := http.Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(`{"input":"second"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var refused struct{ Error planner.APIError }
	if err := json.Unmarshal(body, &refused); err != nil {
		t.Fatalf("the refusal is not JSON: %s", body)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		refused.Error.Status != 429 || refused.Error.RetryAfter != 1 || !strings.Contains(refused.Error.Message, "saturated") {
		t.Fatalf("second start: %d, Retry-After %q, body %s; want 429, 1 and a JSON error that says why",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := metricValue(t, reg, "toolfleet_planner_runs_refused_total", "starting"); n != 1 {
		t.Errorf("runs refused for starting: %v, want 1", n)
	}
	// Nothing of the refused run is stored: the journal holds one run's input.
	journal, err := f.JS.Stream(f.Ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	info, err := journal.Info(f.Ctx, jetstream.WithSubjectFilter("toolfleet.runlog.*.input"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 1 {
		t.Errorf("inputs stored: %v, want the first run's only", info.State.Subjects)
	}

	proxy.Release()
	if status := <-first; status != http.StatusAccepted {
		t.Fatalf("the first start: %d, want 202", status)
	}
	c, _ := runs.New(srv.URL, runs.WithRetries(0))
	if run, err := c.Start(f.Ctx, runs.StartRequest{Input: "third", Wait: true}); err != nil || !run.Done() {
		t.Fatalf("the start after the first was through: %+v, %v; want it admitted and done", run, err)
	}

	d := loadOpenAPI(t)
	natstest.Eventually(t, waitTimeout, "every handler to return", func() bool { return rec.inFlight.Load() == 0 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.seen {
		d.validate(t, e)
	}
}

// metricValue is the value of the counter name{reason} in reg (0 when absent).
func metricValue(t *testing.T, reg prometheus.Gatherer, name, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
