package planner

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// agreesWithEncodingJSON fails t when decodeWatched and json.Unmarshal read b
// differently: both fail, or both build the same.
func agreesWithEncodingJSON(t *testing.T, b []byte) {
	t.Helper()
	var want watchedRun
	wantErr := json.Unmarshal(b, &want)
	got, err := decodeWatched(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeWatched error %v, json.Unmarshal error %v, for %s", err, wantErr, b)
	}
	if err == nil && !reflect.DeepEqual(*got, want) {
		t.Fatalf("decodeWatched read %s\nas   %+v\nwant %+v", b, *got, want)
	}
}

// TestDecodeWatchedAgreesWithEncodingJSON reads, with the watch's decoder and with
// encoding/json, every value the runs bucket was given by a run of two tool steps
// (arguments and texts with escapes and non-ASCII, a call refused as invalid), a state
// with every field the watch reads set, and values a planner never writes but a bucket
// could hold: escapes, case-folded keys, nulls, other types, garbage.
func TestDecodeWatchedAgreesWithEncodingJSON(t *testing.T) {
	tb := setup(t, map[string]string{"main": `
name: two steps
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}, {name: echo, arguments: {text: "é\"\\n"}}]
  - calls: [{name: add, arguments: {a: "not a number"}}]
  - text: "done, with \"quotes\" and ünïcode"
`})
	ctx := context.Background()
	// Every value the runs bucket is given, as it is given.
	stored := make(chan []byte, 1000)
	sub, err := tb.nc.Subscribe("$KV."+events.BucketRuns+".>", func(m *nats.Msg) { stored <- m.Data })
	if err != nil {
		t.Fatal(err)
	}
	run, err := tb.p.Start(ctx, StartRequest{Input: "add \"this\"\n and ünïcode", Tools: []string{"add", "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "the run ends", func() bool {
		r, err := tb.p.Get(ctx, run.ID)
		return err == nil && r.Status == StatusDone
	})
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	var values [][]byte
	for len(stored) > 0 {
		values = append(values, <-stored)
	}
	if len(values) < 4 {
		t.Fatalf("the run left %d values, want at least 4", len(values))
	}
	for _, v := range values {
		agreesWithEncodingJSON(t, v)
	}

	// A state with every field the watch reads, as the planner encodes it.
	at := time.Date(2026, 11, 29, 4, 34, 27, 315950762, time.UTC)
	fin := at.Add(time.Second)
	full := &Run{ID: "r1", ParentID: "r0-0-1", Depth: 1, Status: StatusRunning, Termination: "", Detail: "d\u2028\"x\"",
		Model: "main", Tenant: "acme", Role: "admin", Step: 3, Recorded: 3, InputPreview: "in\tput",
		CallCount: 4, Called: []string{"add", "echo"}, Cost: 0.125, CreatedAt: at, Deadline: at.Add(time.Hour), FinishedAt: &fin,
		Lease: &runrec.StepLease{Owner: "p1", Step: 3, Until: at.Add(time.Minute)},
		Calls: []*CallRecord{
			{ID: "r1-3-0", Name: "add", Status: string(CallAwaitingApproval), Executor: "e1", CalledAt: at,
				Approval: &events.Approval{Decision: events.DecisionApprove, By: "ann", Reason: "ok"}, ApprovalExpiresAt: &fin},
			{ID: "r1-3-1", Name: "echo", Status: "ok", Local: true, CalledAt: at, FinishedAt: &fin},
		},
		Settled:    []*CallRecord{{ID: "r1-2-0", Name: "add", Status: "denied", CalledAt: at, Approval: &events.Approval{Decision: events.DecisionDeny, By: "bob"}}},
		ToolErrors: 2, Denials: 1, PausedMS: 1500, Metadata: map[string]string{"team": "ops"},
		Paused:   &runrec.RunPause{At: at, Step: 3, Reason: "requested", By: "acme/admin", Why: "look"},
		Controls: runrec.Controls{Canceled: &runrec.RunCancel{By: "acme/admin", At: at}}}
	full.Usage.InputTokens, full.Usage.OutputTokens, full.Turn = 120, 30, 2
	b, err := json.Marshal(full.Control())
	if err != nil {
		t.Fatal(err)
	}
	agreesWithEncodingJSON(t, b)
	got, _ := decodeWatched(b)
	if got.Lease == nil || got.Lease.Owner != "p1" || len(got.Calls) != 2 || got.Calls[0].Approval == nil || got.FinishedAt == nil ||
		got.Calls[0].ApprovalExpiresAt == nil || len(got.Settled) != 1 || got.ToolErrors != 2 || got.Denials != 1 || got.PausedMS != 1500 ||
		got.Metadata["team"] != "ops" || got.Paused == nil || got.Canceled == nil {
		t.Fatalf("a full state read as %+v", got)
	}

	for _, v := range hostileWatchedValues {
		agreesWithEncodingJSON(t, []byte(v))
	}
}

// hostileWatchedValues are values no planner writes: the decoder must read them as
// encoding/json does, or fail as it does.
var hostileWatchedValues = []string{
	`{}`, ` { } `, `{"id":"a"}   `, `null`, `[]`, `"x"`, `{`, `{"id":}`, `{"id":"a",}`, `{"id":"a"} x`,
	`{"id":"a\"b","detail":"\u00e9\n","model":"\ud83d\ude00"}`,
	`{"\u0069d":"escaped key"}`, `{"ID":"other case"}`, `{"CreatedAT":"2026-11-29T04:34:27Z"}`, `{"calls":[{"NAME":"x"}]}`,
	`{"\u212Aey":1}`, `{"ſtatus":"kelvin and long s fold to k and s"}`,
	`{"id":null,"depth":null,"calls":null,"finishedAt":null,"lease":null,"usage":null,"called":null}`,
	`{"id":"a","id":"b","calls":[{"id":"x"}],"calls":[]}`,
	`{"depth":"3"}`, `{"depth":3.5}`, `{"depth":1e2}`, `{"step":-0}`, `{"cost":1e400}`, `{"cost":"1"}`,
	`{"calls":[{"local":"yes"}]}`, `{"calls":[{"local":true,"approval":{"decision":"deny"}}]}`, `{"calls":{}}`,
	`{"calls":[1]}`, `{"calls":[{"id":"a"},]}`, `{"createdAt":"yesterday"}`, `{"finishedAt":"2026-11-29T04:34:27Z"}`,
	`{"status":"` + "\xff" + `"}`, `{"lease":{"owner":"p","until":"2026-11-29T04:34:27Z"},"turn":2}`,
	`{"unknown":{"deep":[1,2,{"x":null}]},"id":"after"}`, `{"limits":{"timeout":"5m0s"},"offered":[{"step":1}]}`,
	`{"id":"` + strings.Repeat("x", 70_000) + `"}`,
}

// FuzzDecodeWatched checks decodeWatched against encoding/json on any input; its seeds
// run with the tests.
func FuzzDecodeWatched(f *testing.F) {
	for _, v := range hostileWatchedValues {
		f.Add([]byte(v))
	}
	f.Add(benchRunState(1, time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)))
	f.Fuzz(func(t *testing.T, b []byte) { agreesWithEncodingJSON(t, b) })
}

// BenchmarkDecodeWatched reads a finished run's value (one call) as every replica's
// watch does, against encoding/json's reflection on the same value.
func BenchmarkDecodeWatched(b *testing.B) {
	v := benchRunState(1, time.Now())
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeWatched(v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var w watchedRun
			if err := json.Unmarshal(v, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
}
