package events

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketLimits holds the fleet-wide state of the tools that declare limits
// (tools.Definition.RateLimit, MaxInFlightPerTenant): one key per rate-limited tool and
// one per tool and tenant with a cap, each changed only by compare-and-set. Only
// executors serving such a tool create and use it; a fleet without
// limits never has it.
const BucketLimits = "toolfleet-limits"

// limitsMaxAge is how long an untouched key of [BucketLimits] is kept. Every value in it
// is obsolete well before: a rate key holds a time at most tools.MaxLimitWait ahead of
// its last write, a tenant key leases that are renewed every few seconds while a call
// runs.
const limitsMaxAge = time.Hour

// LimitsBucket is the configuration of [BucketLimits]: one value per key, kept an hour
// after its last change.
func (c Config) LimitsBucket() jetstream.KeyValueConfig {
	c = c.WithDefaults()
	return jetstream.KeyValueConfig{Bucket: BucketLimits,
		Description: "toolfleet fleet-wide tool limits: rate reservations and tenants' calls in flight",
		History:     1, TTL: limitsMaxAge, MaxValueSize: 1 << 20, Storage: c.storage(), Replicas: c.Replicas}
}
