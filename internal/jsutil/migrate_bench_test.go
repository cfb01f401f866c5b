package jsutil_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// BenchmarkRunLogMigration measures the upgrade of an old run log of 5000 records of
// 1 KiB (TOOLFLEET_RUNLOG) into the journal, EnsurePlanner's whole start included,
// against the baseline of the same run: writing those records, each awaited, as the old
// planner did. Reported: migrate-ms, write-ms and migrate/write.
func BenchmarkRunLogMigration(b *testing.B) {
	const records = 5000
	data := make([]byte, 1024)
	for i := range data {
		data[i] = 'x'
	}
	var write, migrate time.Duration
	for range b.N {
		b.StopTimer()
		srv := natstest.Start(b)
		js, err := jetstream.New(srv.Connect())
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		cfg := events.Config{}
		if _, err := js.CreateKeyValue(ctx, cfg.RunsBucket()); err != nil {
			b.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, oldRunLogStream(cfg)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		for i := range records {
			if _, err := js.PublishMsg(ctx, writeOnce(fmt.Sprintf("toolfleet.runlog.r%d.step.0", i), string(data))); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		if _, err := jsutil.EnsurePlanner(ctx, js, cfg); err != nil {
			b.Fatal(err)
		}
		write, migrate = write+t1.Sub(t0), migrate+time.Since(t1)
		b.StopTimer()
		s, err := js.Stream(ctx, events.StreamJournal)
		if err != nil {
			b.Fatal(err)
		}
		if n := s.CachedInfo().State.Msgs; n != records {
			b.Fatalf("journal after the migration holds %d messages, want %d", n, records)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(write.Milliseconds())/float64(b.N), "write-ms")
	b.ReportMetric(float64(migrate.Milliseconds())/float64(b.N), "migrate-ms")
	b.ReportMetric(float64(migrate)/float64(write), "migrate/write")
}
