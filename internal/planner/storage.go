package planner

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// What the planner keeps in JetStream besides the shared streams of pkg/events.
const (
	// streamPlan is the work queue of run steps: one message "take step N of run R" per
	// step, consumed by whichever planner replica is free.
	streamPlan        = "TOOLFLEET_PLAN"
	planSubjectPrefix = "toolfleet.plan."
	// bucketRuns holds every run's state, key = run id.
	bucketRuns = "toolfleet-runs"

	consumerPlan      = "toolfleet-planner"
	consumerResults   = "toolfleet-planner-results"
	consumerApprovals = "toolfleet-planner-approvals"
)

func ensurePlannerStorage(ctx context.Context, js jetstream.JetStream, cfg events.Config) (jetstream.KeyValue, error) {
	storage := jetstream.FileStorage
	if cfg.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: streamPlan, Description: "toolfleet run steps waiting for a planner",
		Subjects: []string{planSubjectPrefix + ">"}, Retention: jetstream.WorkQueuePolicy,
		Storage: storage, Replicas: cfg.Replicas, MaxAge: cfg.CallsMaxAge.D(),
		Duplicates: cfg.DuplicateWindow.D(),
	})
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", streamPlan, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucketRuns, Description: "toolfleet run state", History: 1,
		TTL: 7 * 24 * time.Hour, Storage: storage, Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", bucketRuns, err)
	}
	return kv, nil
}
