package jsutil_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// oldRunLogStream is the run log's stream as versions before the journal made it
// (events.Config.RunLogStream of those versions).
func oldRunLogStream(c events.Config) jetstream.StreamConfig {
	c = c.WithDefaults()
	st := jetstream.FileStorage
	return jetstream.StreamConfig{Name: events.StreamRunLog, Description: "toolfleet run logs: inputs and steps of planner runs",
		Subjects: []string{events.AllRunLog}, Retention: jetstream.LimitsPolicy, Storage: st,
		Replicas: c.Replicas, MaxAge: c.RunsMaxAge.D() + 24*time.Hour, Discard: jetstream.DiscardOld, AllowDirect: true}
}

// oldRecords are the run log of two runs as an earlier version wrote them.
var oldRecords = []struct{ subject, data string }{
	{"toolfleet.runlog.r1.input", `[{"role":"user","text":"add 1 and 2"}]`},
	{"toolfleet.runlog.r1.step.0", `{"message":{"role":"assistant"},"calls":[{"id":"c1","name":"add"}]}`},
	{"toolfleet.runlog.r1.step.1", `{"message":{"role":"assistant","text":"3"}}`},
	{"toolfleet.runlog.r2.input", `[{"role":"user","text":"hello"}]`},
	{"toolfleet.runlog.r2.args.0.0", `{"a":1}`},
}

// bareJetStream is a server without toolfleet's streams, and a context that ends after
// timeout (or with the test).
func bareJetStream(t *testing.T, timeout time.Duration) (jetstream.JetStream, context.Context) {
	t.Helper()
	js, err := jetstream.New(natstest.Start(t).Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return js, ctx
}

// oldStore is a server with the stores an earlier planner left: the runs bucket as a
// plain bucket, with a run's state, and its run log on TOOLFLEET_RUNLOG, each record
// written once as that planner wrote it (expecting no message on its subject).
func oldStore(t *testing.T) (jetstream.JetStream, context.Context) {
	t.Helper()
	js, ctx := bareJetStream(t, 60*time.Second)
	cfg := events.Config{}
	kv, err := js.CreateKeyValue(ctx, cfg.RunsBucket())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "r1", []byte(`{"status":"done","step":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, oldRunLogStream(cfg)); err != nil {
		t.Fatal(err)
	}
	for _, r := range oldRecords {
		if _, err := js.PublishMsg(ctx, writeOnce(r.subject, r.data)); err != nil {
			t.Fatalf("old record %s: %v", r.subject, err)
		}
	}
	return js, ctx
}

// writeOnce is a run-log record as planners write it: stored only if its subject has none.
func writeOnce(subject, data string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte(data)
	m.Header.Set(events.HeaderExpectedLastSubjectSeq, "0")
	return m
}

// assertMigrated checks that the journal holds every old record once, under its own
// subject with its data; that a record written once stays so (a second write is
// refused) while a new one is taken; that the old stream is retired with its messages
// and says so; and that the journal no longer sources it. written is the number of new
// records earlier checks wrote.
func assertMigrated(t *testing.T, ctx context.Context, js jetstream.JetStream, written int) {
	t.Helper()
	journal, err := js.Stream(ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	info, err := journal.Info(ctx, jetstream.WithSubjectFilter(events.AllRunLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != len(oldRecords)+written {
		t.Errorf("journal run-log subjects %v, want the %d old records' and %d new", info.State.Subjects, len(oldRecords), written)
	}
	for _, r := range oldRecords {
		if n := info.State.Subjects[r.subject]; n != 1 {
			t.Errorf("journal holds %d messages on %s, want 1", n, r.subject)
		}
		m, err := journal.GetLastMsgForSubject(ctx, r.subject)
		if err != nil {
			t.Errorf("journal record %s: %v", r.subject, err)
			continue
		}
		if string(m.Data) != r.data {
			t.Errorf("journal record %s = %s, want %s", r.subject, m.Data, r.data)
		}
	}
	if len(info.Config.Sources) != 0 || !info.Config.AllowAtomicPublish || !slices.Contains(info.Config.Subjects, events.AllRunLog) {
		t.Errorf("journal sources %v, atomic batches %v, subjects %v: want the journal's config", info.Config.Sources,
			info.Config.AllowAtomicPublish, info.Config.Subjects)
	}
	var apiErr *jetstream.APIError
	_, err = js.PublishMsg(ctx, writeOnce("toolfleet.runlog.r1.step.0", `{"message":{"role":"assistant","text":"another answer"}}`))
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Errorf("a second write of a migrated record: %v, want it refused (wrong last sequence)", err)
	}
	if _, err := js.PublishMsg(ctx, writeOnce(fmt.Sprintf("toolfleet.runlog.r1.step.%d", 2+written), `{}`)); err != nil {
		t.Errorf("a new record of a migrated run: %v", err)
	}
	old, err := js.Stream(ctx, events.StreamRunLog)
	if err != nil {
		t.Fatalf("the old run log: %v, want it kept for the operator to delete", err)
	}
	oi := old.CachedInfo()
	if !slices.Equal(oi.Config.Subjects, []string{jsutil.RetiredRunLogSubject}) || oi.State.Msgs != uint64(len(oldRecords)) {
		t.Errorf("old run log subjects %v with %d messages, want retired with its %d", oi.Config.Subjects, oi.State.Msgs, len(oldRecords))
	}
	if retired, err := jsutil.RunLogRetired(ctx, js); err != nil || !retired {
		t.Errorf("RunLogRetired = %v, %v; want true", retired, err)
	}
}

// A planner started on the stores of an earlier version copies its run log into the
// journal: every record, once, still written once; the run's state is untouched; a start
// after that copies nothing more.
func TestEnsurePlannerMigratesTheOldRunLog(t *testing.T) {
	t.Parallel()
	js, ctx := oldStore(t)
	if retired, err := jsutil.RunLogRetired(ctx, js); err != nil || retired {
		t.Fatalf("RunLogRetired before the upgrade = %v, %v; want false", retired, err)
	}
	kv, err := jsutil.EnsurePlanner(ctx, js, events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	assertMigrated(t, ctx, js, 0)
	if e, err := kv.Get(ctx, "r1"); err != nil || string(e.Value()) != `{"status":"done","step":1}` {
		t.Fatalf("run r1's state after the upgrade: %v, %v", e, err)
	}
	journal, err := js.Stream(ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	before := journal.CachedInfo().State
	if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{}); err != nil {
		t.Fatalf("a start after the upgrade: %v", err)
	}
	after, err := journal.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.Msgs != before.Msgs || after.State.LastSeq != before.LastSeq {
		t.Fatalf("a start after the upgrade changed the journal: %d messages (last %d), were %d (last %d)",
			after.State.Msgs, after.State.LastSeq, before.Msgs, before.LastSeq)
	}
	assertMigrated(t, ctx, js, 1)
}

// A planner stopped in the middle of the upgrade leaves a state the next start finishes:
// after the old stream's subjects were retired, and after the journal started copying.
func TestEnsurePlannerFinishesAStoppedMigration(t *testing.T) {
	t.Parallel()
	retire := func(t *testing.T, ctx context.Context, js jetstream.JetStream) {
		t.Helper()
		sc := oldRunLogStream(events.Config{})
		sc.Subjects = []string{jsutil.RetiredRunLogSubject}
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("after the old subjects were retired", func(t *testing.T) {
		t.Parallel()
		js, ctx := oldStore(t)
		retire(t, ctx, js)
		if retired, err := jsutil.RunLogRetired(ctx, js); err != nil || retired {
			t.Fatalf("RunLogRetired with the copy not done = %v, %v; want false", retired, err)
		}
		if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{}); err != nil {
			t.Fatal(err)
		}
		assertMigrated(t, ctx, js, 0)
	})
	t.Run("after the journal started copying", func(t *testing.T) {
		t.Parallel()
		js, ctx := oldStore(t)
		retire(t, ctx, js)
		jc := events.Config{}.JournalStream()
		jc.Sources = []*jetstream.StreamSource{{Name: events.StreamRunLog}}
		if _, err := js.UpdateStream(ctx, jc); err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, 20*time.Second, "the journal to copy the old records", func() bool {
			s, err := js.Stream(ctx, events.StreamJournal)
			return err == nil && s.CachedInfo().State.Msgs >= uint64(len(oldRecords))
		})
		if _, err := jsutil.EnsurePlanner(ctx, js, events.Config{}); err != nil {
			t.Fatal(err)
		}
		assertMigrated(t, ctx, js, 0)
	})
}

// Planner replicas started together all start, and the old records are copied once.
func TestEnsurePlannerMigratesWithPlannersStartingTogether(t *testing.T) {
	t.Parallel()
	js, ctx := oldStore(t)
	const planners = 4
	var wg sync.WaitGroup
	errs := make([]error, planners)
	for i := range planners {
		wg.Go(func() {
			_, err := jsutil.EnsurePlanner(ctx, js, events.Config{})
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("planner %d: %v", i, err)
		}
	}
	assertMigrated(t, ctx, js, 0)
}

// A stream named TOOLFLEET_RUNLOG that holds something other than the run log is not
// touched: the planner does not start, and the error says why.
func TestEnsurePlannerLeavesAForeignRunLogStream(t *testing.T) {
	t.Parallel()
	js, ctx := bareJetStream(t, 20*time.Second)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.StreamRunLog, Subjects: []string{"audit.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err := jsutil.EnsurePlanner(ctx, js, events.Config{})
	if err == nil || !strings.Contains(err.Error(), "not the run log of an earlier version") {
		t.Fatalf("EnsurePlanner with a foreign %s: %v, want an error saying it is not the run log", events.StreamRunLog, err)
	}
	s, err := js.Stream(ctx, events.StreamRunLog)
	if err != nil || !slices.Equal(s.CachedInfo().Config.Subjects, []string{"audit.>"}) {
		t.Errorf("the foreign stream: %v, %v; want it left alone", s, err)
	}
	if _, err := js.Stream(ctx, events.StreamJournal); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("journal: %v, want none made", err)
	}
}
