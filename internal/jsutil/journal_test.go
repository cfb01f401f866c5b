package jsutil_test

import (
	"slices"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// EnsurePlanner makes the runs bucket's stream the runs' journal: still a bucket to
// every client, with the run log's subjects and atomic batches. A run-log record and a
// value of the bucket then go in one batch, and a bucket made before (by an earlier
// version, or by hand) gets the journal's settings.
func TestEnsurePlannerMakesTheJournal(t *testing.T) {
	t.Parallel()
	js, ctx := bareJetStream(t, 20*time.Second)
	cfg := events.Config{}
	if _, err := js.CreateKeyValue(ctx, cfg.RunsBucket()); err != nil { // as an earlier version made it
		t.Fatal(err)
	}
	kv, err := jsutil.EnsurePlanner(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	if !slices.Contains(sc.Subjects, events.AllRunLog) || !slices.Contains(sc.Subjects, "$KV."+events.BucketRuns+".>") || !sc.AllowAtomicPublish {
		t.Fatalf("journal subjects %v, atomic batches %v", sc.Subjects, sc.AllowAtomicPublish)
	}
	if sc.MaxAge != cfg.WithDefaults().RunsMaxAge.D()+24*time.Hour {
		t.Errorf("journal max age %s, want RunsMaxAge plus a day", sc.MaxAge)
	}
	rev, err := kv.Create(ctx, "r1", []byte(`{"step":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "toolfleet.runlog.r1.step.0", []byte(`{}`)); err != nil {
		t.Fatalf("a run-log record: %v", err)
	}
	if e, err := kv.Get(ctx, "r1"); err != nil || e.Revision() != rev {
		t.Fatalf("the run's value after a record: %v, %v", e, err)
	}
	// Again, as every planner replica does when it starts.
	if _, err := jsutil.EnsurePlanner(ctx, js, cfg); err != nil {
		t.Fatalf("second EnsurePlanner: %v", err)
	}
}
