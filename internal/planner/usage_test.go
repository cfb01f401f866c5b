package planner

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Runs through the real planner and executor teach a learning picker: after tenant
// acme's runs used echo for "parrot ..." requests (which no tool's text matches), a pick
// for a like request of acme ranks echo first, with a learned reason; another tenant's
// picks and provenance are unchanged; a failed call teaches nothing.
func TestUsageTeachesThePicker(t *testing.T) {
	b := setup(t, nil)
	l, err := pick.NewLearned(pick.LearnConfig{RefreshEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := pickerservice.New(b.srv.Connect(), pickerservice.WithLogger(zerolog.Nop()), pickerservice.WithLearning(l))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, svc.Run)
	models := map[string]provider.Model{
		"echoer": scriptedModel(t, "steps:\n  - calls: [{name: echo, arguments: {text: hi}}]\n  - text: done\n"),
		"failer": scriptedModel(t, "steps:\n  - calls: [{name: fail, arguments: {}}]\n  - text: done\n"),
	}
	b.swapPlanner(t, Config{Models: models, DefaultModel: "echoer"})
	acme := events.Identity{Tenant: "acme", Role: "user"}
	for _, in := range []string{"parrot this phrase back", "parrot my sentence please", "parrot the greeting"} {
		run := b.run(t, StartRequest{Input: in, Caller: acme})
		if run.Status != StatusDone {
			t.Fatalf("run %q: %s %s", in, run.Status, run.Detail)
		}
	}
	failed := b.run(t, StartRequest{Input: "parrot a failure", Model: "failer", Caller: acme})
	if failed.Calls[0].Status != string(events.StatusError) {
		t.Fatalf("the failing call ended %s", failed.Calls[0].Status)
	}

	client := NewPickerClient(b.nc, 5*time.Second)
	q := PickQuery{Input: "parrot this word", Tenant: "acme", Max: 3}
	var res []pick.Result
	// Usage records reach the picker on their own: wait for all three, not the first pick
	// that ranks echo first (two requests already do).
	natstest.Eventually(t, waitTimeout, "echo picked first for acme from 3 requests", func() bool {
		res, err = client.Pick(b.ctx, q)
		return err == nil && len(res) > 0 && res[0].Name == "echo" && strings.Contains(res[0].Reason, "3 requests")
	})
	if res[0].Provenance.Scorer != pick.LearnedScorerName || !containsAll(res[0].Reason, `"parrot"`, "3 requests") {
		t.Fatalf("echo's provenance %+v, reason %q: want the learned scorer and 3 learned requests", res[0].Provenance, res[0].Reason)
	}
	// Another tenant learned nothing: its pick is the cold one (no tool says "parrot").
	q.Tenant = "globex"
	if res, err = client.Pick(b.ctx, q); err != nil || len(res) != 0 {
		t.Fatalf("globex's pick = %+v, %v; want no tool", res, err)
	}
	debug := pickDebug(t, b, "parrot echo", "globex")
	if debug.Results[0].Name != "echo" || !json.Valid(debug.raw) || containsAll(string(debug.raw), "learned") {
		t.Fatalf("globex's provenance shows learning: %s", debug.raw)
	}
	// Only ok calls are recorded: three for echo, none for fail.
	st, err := b.js.Stream(b.ctx, events.StreamUsage)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(b.ctx, "toolfleet.usage.fail.acme"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("a usage record for the failed call: %v", err)
	}
	if info, _ := st.Info(b.ctx); info.State.Msgs != 3 {
		t.Fatalf("usage stream holds %d records, want 3", info.State.Msgs)
	}
	// A record names the definition it was learned for: a tool whose definition changes
	// drops what it learned.
	m, err := st.GetLastMsgForSubject(b.ctx, "toolfleet.usage.echo.acme")
	if err != nil {
		t.Fatal(err)
	}
	_, u, err := events.DecodeUsage(events.StoredMsg(m))
	echo, _ := b.p.cat.get("echo")
	if err != nil || u.ToolKey == "" || u.ToolKey != pick.LearnKey(echo) {
		t.Fatalf("echo's usage record has tool key %q (%v), want its definition's %q", u.ToolKey, err, pick.LearnKey(echo))
	}
}

// With NoUsage the planner publishes no usage record.
func TestNoUsageRecordsWhenOff(t *testing.T) {
	b := setup(t, nil)
	b.swapPlanner(t, Config{Models: map[string]provider.Model{
		"echoer": scriptedModel(t, "steps:\n  - calls: [{name: echo, arguments: {text: hi}}]\n  - text: done\n")}, NoUsage: true})
	// The stream was made by the first planner; the swapped one must not write to it.
	if run := b.run(t, StartRequest{Input: "parrot this"}); run.Status != StatusDone {
		t.Fatalf("run: %s", run.Status)
	}
	st, err := b.js.Stream(b.ctx, events.StreamUsage)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(b.ctx); info.State.Msgs != 0 {
		t.Fatalf("usage stream holds %d records with usage off", info.State.Msgs)
	}
}

type debugReply struct {
	pickerservice.Response
	raw []byte
}

// pickDebug asks the picker service directly, with debug provenance.
func pickDebug(t *testing.T, b *testBundle, input, tenant string) debugReply {
	t.Helper()
	in, _ := json.Marshal(input)
	req, _ := json.Marshal(pickerservice.Request{Input: in, Options: pickerservice.RequestOptions{
		Options: pick.Options{Debug: true, MinScore: new(0.0)}, Tenant: tenant}})
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	msg, err := b.nc.RequestWithContext(ctx, events.PickSubject, req)
	if err != nil {
		t.Fatal(err)
	}
	var r debugReply
	if err := json.Unmarshal(msg.Data, &r.Response); err != nil || len(r.Results) == 0 {
		t.Fatalf("pick reply %s: %v", msg.Data, err)
	}
	r.raw = msg.Data
	return r
}

func containsAll(s string, parts ...string) bool {
	return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(s, p) })
}
