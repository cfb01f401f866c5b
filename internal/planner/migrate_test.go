package planner

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// A run stored by an earlier version, its run log on TOOLFLEET_RUNLOG, keeps its
// conversation through the upgrade: a planner of this version started on those stores
// shows it, and continues the run.
//
// The old layout is made from a real run: its records are moved from the journal to a
// TOOLFLEET_RUNLOG made as earlier versions made it (events.Config.RunLogStream then),
// written as they wrote them (once per subject), and the runs bucket's stream is set back
// to a plain bucket.
func TestUpgradeKeepsTheConversationOfAnEarlierRun(t *testing.T) {
	const script = `
steps:
  - calls: [{name: add, arguments: {a: 1, b: 2}}]
  - text: three, as you asked
`
	b := setup(t, map[string]string{"main": script})
	run := b.run(t, StartRequest{Input: "1+2", Tools: []string{"add"}, Limits: Limits{MaxSteps: 1}})
	if run.Termination != TerminationMaxSteps {
		t.Fatalf("first turn ended %s", run.Termination)
	}
	before, err := b.p.Get(b.ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	b.stopPlanner()

	// The stores as an earlier version left them.
	journal, err := b.js.Stream(b.ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	type record struct{ subject, data string }
	var records []record
	cons, err := journal.OrderedConsumer(b.ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.AllRunLog}})
	if err != nil {
		t.Fatal(err)
	}
	n := journal.CachedInfo().State.Msgs
	for range n {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			break // the bucket's values are not run-log records
		}
		records = append(records, record{m.Subject(), string(m.Data())})
	}
	if len(records) < 2 {
		t.Fatalf("the run wrote %d records, want its input and its step", len(records))
	}
	if err := journal.Purge(b.ctx, jetstream.WithPurgeSubject(events.AllRunLog)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.js.UpdateKeyValue(b.ctx, b.cfg.RunsBucket()); err != nil {
		t.Fatalf("the runs bucket as a plain bucket: %v", err)
	}
	c := b.cfg.WithDefaults()
	if _, err := b.js.CreateStream(b.ctx, jetstream.StreamConfig{Name: events.StreamRunLog,
		Subjects: []string{events.AllRunLog}, Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
		Replicas: c.Replicas, MaxAge: c.RunsMaxAge.D() + 24*time.Hour, Discard: jetstream.DiscardOld, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		m := nats.NewMsg(r.subject)
		m.Data = []byte(r.data)
		m.Header.Set(events.HeaderExpectedLastSubjectSeq, "0")
		if _, err := b.js.PublishMsg(b.ctx, m); err != nil {
			t.Fatalf("old record %s: %v", r.subject, err)
		}
	}

	// This version's planner starts on them.
	p := b.swapPlanner(t, Config{Models: map[string]provider.Model{"main": scriptedModel(t, script)},
		DefaultModel: "main"})
	after, err := p.Get(b.ctx, run.ID)
	if err != nil {
		t.Fatalf("the run after the upgrade: %v", err)
	}
	if len(after.Messages) != len(before.Messages) || len(after.Messages) != 3 {
		t.Fatalf("conversation after the upgrade %+v, before %+v", after.Messages, before.Messages)
	}
	for i := range before.Messages {
		if after.Messages[i].Role != before.Messages[i].Role || after.Messages[i].Text != before.Messages[i].Text ||
			len(after.Messages[i].ToolCalls) != len(before.Messages[i].ToolCalls) || len(after.Messages[i].ToolResults) != len(before.Messages[i].ToolResults) {
			t.Errorf("message %d after the upgrade %+v, before %+v", i, after.Messages[i], before.Messages[i])
		}
	}
	if _, added, err := p.Continue(b.ctx, run.ID, FollowUp{Input: "go on"}); err != nil || !added {
		t.Fatalf("follow-up after the upgrade: %v, %v", added, err)
	}
	done := b.wait(t, run.ID)
	if done.Termination != TerminationCompleted || done.Answer != "three, as you asked" {
		t.Fatalf("continued run ended %s (%s), answer %q", done.Termination, done.Detail, done.Answer)
	}
	roles := ""
	for _, m := range done.Messages {
		roles += string(m.Role)[:1]
	}
	if roles != "uatua" {
		t.Fatalf("conversation of the continued run %s: %+v", roles, done.Messages)
	}
}
