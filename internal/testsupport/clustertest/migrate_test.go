package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// On an R3 cluster, the run log of an earlier version (TOOLFLEET_RUNLOG at R3) is copied
// into the R3 journal by planners starting together on different nodes: every record
// once, still written once, and the old stream retired.
func TestRunLogMigrationOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster")
	}
	c := startCluster(t, buildNATSServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := events.Config{Replicas: 3}
	js, err := jetstream.New(c.connect(t, "admin", 0))
	if err != nil {
		t.Fatal(err)
	}
	// A request sent before the cluster has a meta leader may go unanswered: ask again.
	retry := func(what string, f func(context.Context) error) {
		t.Helper()
		var err error
		for range 20 {
			reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = f(reqCtx)
			cancel()
			if err == nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("%s: %v", what, err)
	}
	retry("old runs bucket", func(ctx context.Context) error {
		_, err := js.CreateOrUpdateKeyValue(ctx, cfg.RunsBucket())
		return err
	})
	d := cfg.WithDefaults()
	retry("old run log", func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: events.StreamRunLog, Subjects: []string{events.AllRunLog},
			Storage: jetstream.FileStorage, Replicas: 3, MaxAge: d.RunsMaxAge.D() + 24*time.Hour,
			Discard: jetstream.DiscardOld, AllowDirect: true})
		return err
	})
	const records = 200
	for i := range records {
		m := nats.NewMsg(fmt.Sprintf("toolfleet.runlog.r%d.input", i))
		m.Data = fmt.Appendf(nil, `[{"role":"user","text":"%d"}]`, i)
		m.Header.Set(events.HeaderExpectedLastSubjectSeq, "0")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		pjs, err := jetstream.New(c.connect(t, fmt.Sprintf("planner-%d", i), i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _, errs[i] = jsutil.EnsurePlanner(ctx, pjs, cfg) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("planner on node %d: %v", i, err)
		}
	}
	journal, err := js.Stream(ctx, events.StreamJournal)
	if err != nil {
		t.Fatal(err)
	}
	info, err := journal.Info(ctx, jetstream.WithSubjectFilter(events.AllRunLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != records || info.Config.Replicas != 3 || len(info.Config.Sources) != 0 {
		t.Fatalf("journal: %d run-log subjects (want %d), replicas %d, sources %v", len(info.State.Subjects), records,
			info.Config.Replicas, info.Config.Sources)
	}
	for s, n := range info.State.Subjects {
		if n != 1 {
			t.Errorf("%s holds %d messages, want 1", s, n)
		}
	}
	m := nats.NewMsg("toolfleet.runlog.r7.input")
	m.Header.Set(events.HeaderExpectedLastSubjectSeq, "0")
	if _, err := js.PublishMsg(ctx, m); err == nil {
		t.Error("a second write of a copied record was stored, want it refused")
	}
	if retired, err := jsutil.RunLogRetired(ctx, js); err != nil || !retired {
		t.Errorf("RunLogRetired = %v, %v; want true", retired, err)
	}
}
