package events

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Names of the streams and buckets toolfleet stores in JetStream.
const (
	StreamCalls       = "TOOLFLEET_CALLS"
	StreamResults     = "TOOLFLEET_RESULTS"
	StreamEvents      = "TOOLFLEET_EVENTS"
	StreamDeadLetters = "TOOLFLEET_DLQ"
	// StreamPayloads holds payloads stored by reference (see [PayloadRef]).
	StreamPayloads  = "TOOLFLEET_PAYLOADS"
	BucketCatalog   = "toolfleet-catalog"
	BucketInflight  = "toolfleet-inflight"
	BucketApprovals = "toolfleet-approvals"
	// StreamPlan and BucketRuns are the planner's: only planners create and use them
	// (see [Config.PlanStream], [Config.RunsBucket]).
	StreamPlan = "TOOLFLEET_PLAN"
	BucketRuns = "toolfleet-runs"
	// BucketEmbeddings is the picker's: tool vectors shared between its replicas (see
	// [Config.EmbeddingsBucket]).
	BucketEmbeddings = "toolfleet-embeddings"
)

// HeaderAllowance is added to MaxMsgSize for the stream limit: the limit applies to
// headers plus body, MaxMsgSize to the body alone. Likewise a result's body must leave
// this much of the server's max_payload to its headers.
const HeaderAllowance = 16 << 10

// Config is every setting JetStream stores for toolfleet, in one place: what streams,
// consumers and buckets look like. The zero value of each field takes the default
// written beside it (see [DefaultConfig]); every part of toolfleet creates the streams
// and buckets ([Config.Streams], [Config.Buckets]) from the same Config, so whichever
// part starts first creates the same things.
//
// # Durability
//
// A JetStream server flushes its files to disk every sync_interval (2 minutes by
// default), so on a single node an acknowledged message can be lost on power loss
// (not on a process crash). toolfleet's guarantees assume either Replicas: 3 in a
// cluster — a message is acknowledged once a majority stored it, which covers the loss
// of a node — or a server configured with sync_interval: always, which costs about ten
// times the throughput. sync_interval is a server setting, not a stream setting, which is
// why it is not a field here; deploy/ sets Replicas 3 for production.
type Config struct {
	// Replicas of every stream and bucket: 1 on one server (default), 3 in a cluster.
	Replicas int `json:"replicas,omitempty"`
	// Storage is "file" (default) or "memory" (tests and throw-away setups only).
	Storage string `json:"storage,omitempty"`
	// CallsMaxAge is how long an unprocessed call is kept. Default 24h.
	CallsMaxAge tools.Duration `json:"callsMaxAge,omitempty"`
	// ResultsMaxAge is how long results are kept for their callers. Default 24h.
	ResultsMaxAge tools.Duration `json:"resultsMaxAge,omitempty"`
	// EventsMaxAge is how long lifecycle and approval events are kept. Default 7 days.
	EventsMaxAge tools.Duration `json:"eventsMaxAge,omitempty"`
	// DeadLettersMaxAge is how long dead letters are kept for inspection. Default 14 days.
	DeadLettersMaxAge tools.Duration `json:"deadLettersMaxAge,omitempty"`
	// MaxMsgSize bounds an event's body in bytes; larger events are refused by the stream
	// at publish time and by [Decode]. Default 1 MiB.
	MaxMsgSize int32 `json:"maxMsgSize,omitempty"`
	// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id to drop a
	// re-published call or result. It is not what makes a call answered once: a result
	// is stored only if its subject has none yet (see [NewResult]) and an executor looks
	// for a stored result before it runs a call, so a call re-published or redelivered
	// after the window gets no second run and no second result for as long as its result
	// is kept (ResultsMaxAge). The window only spares the calls stream a copy. Default
	// 2 minutes.
	DuplicateWindow tools.Duration `json:"duplicateWindow,omitempty"`
	// MaxDeliver is how many times a call may be delivered (first delivery included)
	// before the executor gives up on it: on that delivery its caller is answered with an
	// error (and a copy set aside as a dead letter) instead of running it again. Crashes
	// and ack timeouts use it up, a tool's own retries do not (they happen inside one
	// delivery). The consumer itself never stops redelivering (its max deliver is
	// unlimited), so a call whose answer could not be stored yet comes back until it is:
	// none is left in the stream unanswered. Default 5.
	MaxDeliver int `json:"maxDeliver,omitempty"`
	// AckWait is how long a delivered call may go without an ack or an in-progress
	// heartbeat before JetStream redelivers it. Default 30s.
	AckWait tools.Duration `json:"ackWait,omitempty"`
	// MaxAckPending bounds the calls of one tool in flight across all replicas: the
	// fleet-wide concurrency of a tool class (with shards, each shard's consumer has
	// 1/Shards of it, rounded up). Default 1000.
	MaxAckPending int `json:"maxAckPending,omitempty"`
	// CatalogTTL is how long a catalog entry lives without being refreshed; executors
	// refresh their entries every CatalogTTL/3, so the entry of a tool no executor serves
	// any more disappears within CatalogTTL. Default 30s.
	CatalogTTL tools.Duration `json:"catalogTTL,omitempty"`
	// InflightMaxAge is how long the started-marker of a non-idempotent call is kept.
	// Default 24h (the calls' max age).
	InflightMaxAge tools.Duration `json:"inflightMaxAge,omitempty"`
	// ApprovalsMaxAge bounds how long a parked call may wait for its approval in storage;
	// each approval's own expiry is set by the executor and is shorter. Default 7 days.
	ApprovalsMaxAge tools.Duration `json:"approvalsMaxAge,omitempty"`
	// RunsMaxAge is how long a planner run's state is kept after its last change.
	// Default 7 days.
	RunsMaxAge tools.Duration `json:"runsMaxAge,omitempty"`
	// ClaimCheckBytes is the size above which a tool's output, or a call's arguments, go
	// by reference: stored in chunks on the payloads stream, the result carrying a
	// [PayloadRef] as output_ref, the call as arguments_ref. Default 256
	// KiB (a quarter of MaxMsgSize when that is below 1 MiB); it must stay below
	// MaxMsgSize.
	ClaimCheckBytes int `json:"claimCheckBytes,omitempty"`
	// PayloadMaxBytes bounds a payload stored by reference; a larger output is refused
	// output_too_large, larger arguments input_too_large. Default 64 MiB.
	PayloadMaxBytes int64 `json:"payloadMaxBytes,omitempty"`
	// Shards splits calls and results over this many streams each, so that a cluster
	// spreads their leaders over its nodes (see [Config.CallStreams]; the server needs
	// [Config.MappingsConf]). Default 1: the single streams TOOLFLEET_CALLS and
	// TOOLFLEET_RESULTS. Every part of a fleet must use the same value.
	Shards int `json:"shards,omitempty"`
}

// DefaultConfig returns the defaults: one replica, file storage, and the values written
// beside each field of [Config].
func DefaultConfig() Config {
	return Config{
		Replicas:          1,
		Storage:           "file",
		CallsMaxAge:       tools.Duration(24 * time.Hour),
		ResultsMaxAge:     tools.Duration(24 * time.Hour),
		EventsMaxAge:      tools.Duration(7 * 24 * time.Hour),
		DeadLettersMaxAge: tools.Duration(14 * 24 * time.Hour),
		MaxMsgSize:        1 << 20,
		DuplicateWindow:   tools.Duration(2 * time.Minute),
		MaxDeliver:        5,
		AckWait:           tools.Duration(30 * time.Second),
		MaxAckPending:     1000,
		CatalogTTL:        tools.Duration(30 * time.Second),
		InflightMaxAge:    tools.Duration(24 * time.Hour),
		ApprovalsMaxAge:   tools.Duration(7 * 24 * time.Hour),
		RunsMaxAge:        tools.Duration(7 * 24 * time.Hour),
		ClaimCheckBytes:   256 << 10,
		PayloadMaxBytes:   64 << 20,
	}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	setInt(&c.Replicas, d.Replicas)
	setInt(&c.Shards, 1)
	if c.Storage == "" {
		c.Storage = d.Storage
	}
	setDur(&c.CallsMaxAge, d.CallsMaxAge)
	setDur(&c.ResultsMaxAge, d.ResultsMaxAge)
	setDur(&c.EventsMaxAge, d.EventsMaxAge)
	setDur(&c.DeadLettersMaxAge, d.DeadLettersMaxAge)
	if c.MaxMsgSize == 0 {
		c.MaxMsgSize = d.MaxMsgSize
	}
	setDur(&c.DuplicateWindow, d.DuplicateWindow)
	setInt(&c.MaxDeliver, d.MaxDeliver)
	setDur(&c.AckWait, d.AckWait)
	setInt(&c.MaxAckPending, d.MaxAckPending)
	setDur(&c.CatalogTTL, d.CatalogTTL)
	setDur(&c.InflightMaxAge, d.InflightMaxAge)
	setDur(&c.ApprovalsMaxAge, d.ApprovalsMaxAge)
	setDur(&c.RunsMaxAge, d.RunsMaxAge)
	if c.ClaimCheckBytes == 0 { // a quarter of a small MaxMsgSize
		c.ClaimCheckBytes = min(d.ClaimCheckBytes, int(c.MaxMsgSize)/4)
	}
	if c.PayloadMaxBytes == 0 {
		c.PayloadMaxBytes = d.PayloadMaxBytes
	}
	return c
}

func setInt(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

func setDur(v *tools.Duration, d tools.Duration) {
	if *v == 0 {
		*v = d
	}
}

// Validate reports the first setting that JetStream would refuse or that breaks a
// guarantee, after defaults are applied.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("events config: replicas must be 1 to 5, got %d", c.Replicas)
	case c.Storage != "file" && c.Storage != "memory":
		return fmt.Errorf("events config: storage must be \"file\" or \"memory\", got %q", c.Storage)
	case c.MaxMsgSize < 1:
		return fmt.Errorf("events config: maxMsgSize must be positive, got %d", c.MaxMsgSize)
	case c.MaxDeliver < 2:
		return fmt.Errorf("events config: maxDeliver must be at least 2 (one delivery to run, one to dead-letter), got %d", c.MaxDeliver)
	case c.AckWait.D() < time.Second:
		return fmt.Errorf("events config: ackWait must be at least 1s, got %s", c.AckWait.D())
	case c.CatalogTTL.D() < 3*time.Second:
		return fmt.Errorf("events config: catalogTTL must be at least 3s, got %s", c.CatalogTTL.D())
	case c.DuplicateWindow.D() > c.CallsMaxAge.D() || c.DuplicateWindow.D() > c.ResultsMaxAge.D():
		return fmt.Errorf("events config: duplicateWindow %s exceeds a stream's max age", c.DuplicateWindow.D())
	case c.MaxAckPending < 1:
		return fmt.Errorf("events config: maxAckPending must be at least 1, got %d", c.MaxAckPending)
	case c.ClaimCheckBytes < 1 || c.ClaimCheckBytes >= int(c.MaxMsgSize):
		return fmt.Errorf("events config: claimCheckBytes must be between 1 and maxMsgSize (%d), got %d", c.MaxMsgSize, c.ClaimCheckBytes)
	case c.Shards < 1 || c.Shards > MaxShards:
		return fmt.Errorf("events config: shards must be 1 to %d, got %d", MaxShards, c.Shards)
	case c.PayloadMaxBytes < int64(c.ClaimCheckBytes):
		return fmt.Errorf("events config: payloadMaxBytes must be at least claimCheckBytes, got %d", c.PayloadMaxBytes)
	}
	return nil
}

func (c Config) storage() jetstream.StorageType {
	if c.Storage == "memory" {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Streams returns the stream configurations (with P shards, P calls and P results
// streams, see [Config.CallStreams]):
//   - calls (toolfleet.call.>): work-queue retention, so a call is deleted once acked and
//     JetStream refuses a second consumer with the same filter — exactly one consumer
//     group per tool class, shared by its replicas;
//   - results (toolfleet.result.>): limits retention, read by any number of callers,
//     direct get allowed so a caller can fetch one result by subject;
//   - events (toolfleet.event.>): limits retention, approvals and run lifecycle;
//   - dead letters (toolfleet.dlq.>): limits retention, kept for inspection.
func (c Config) Streams() []jetstream.StreamConfig {
	c = c.WithDefaults()
	base := func(name, subject, desc string, maxAge tools.Duration, ret jetstream.RetentionPolicy) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Description: desc, Subjects: []string{subject},
			Retention: ret, Storage: c.storage(), Replicas: c.Replicas,
			MaxAge: maxAge.D(), MaxMsgSize: c.MaxMsgSize + HeaderAllowance,
			Duplicates: min(c.DuplicateWindow.D(), maxAge.D()), Discard: jetstream.DiscardOld,
			AllowDirect: true,
		}
	}
	calls := base(StreamCalls, AllCalls, "toolfleet tool calls, one work queue per tool", c.CallsMaxAge, jetstream.WorkQueuePolicy)
	results := base(StreamResults, AllResults, "toolfleet tool results", c.ResultsMaxAge, jetstream.LimitsPolicy)
	shards := []jetstream.StreamConfig{calls, results}
	if c.Sharded() {
		shards = c.shardStreams(calls, results)
	}
	return append(shards,
		base(StreamEvents, AllEvents, "toolfleet approvals and run lifecycle events", c.EventsMaxAge, jetstream.LimitsPolicy),
		base(StreamDeadLetters, AllDeadLetters, "toolfleet dead-lettered calls", c.DeadLettersMaxAge, jetstream.LimitsPolicy),
		c.PayloadStream(),
	)
}

// ConsumerName is the durable consumer shared by every replica serving tool.
func ConsumerName(tool string) string { return "toolfleet-call-" + tool }

// ApprovalConsumerName is the durable consumer of approval answers for tool.
func ApprovalConsumerName(tool string) string { return "toolfleet-approval-" + tool }

// CallConsumer returns the durable pull consumer of tool's calls: explicit acks, the
// configured ack wait and max ack pending, and max deliver. Every replica creates it with
// the same settings, so CreateOrUpdate is idempotent.
func (c Config) CallConsumer(tool string) (jetstream.ConsumerConfig, error) {
	c = c.WithDefaults()
	subj, err := CallSubject(Identity{}, tool)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	return jetstream.ConsumerConfig{
		Durable: ConsumerName(tool), Description: "calls of tool " + tool,
		// Anonymous calls and calls with an identity (toolfleet.call.<tool>.<tenant>.<role>).
		FilterSubjects: []string{subj, subj + ".*.*"}, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		// MaxAckPending is the tool's fleet-wide cap: each shard's consumer has its share.
		AckWait: c.AckWait.D(), MaxDeliver: -1, MaxAckPending: (c.MaxAckPending + c.shards() - 1) / c.shards(),
		Replicas: c.Replicas, MemoryStorage: c.Storage == "memory",
	}, nil
}

// ApprovalConsumer returns the durable pull consumer of approval answers for tool, on
// the events stream, shared by the replicas serving tool.
func (c Config) ApprovalConsumer(tool string) (jetstream.ConsumerConfig, error) {
	c = c.WithDefaults()
	filter, err := ApprovalAnswersFilter(tool)
	if err != nil {
		return jetstream.ConsumerConfig{}, err
	}
	return jetstream.ConsumerConfig{
		Durable: ApprovalConsumerName(tool), Description: "approval answers for tool " + tool,
		FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait: c.AckWait.D(), MaxDeliver: -1, MaxAckPending: c.MaxAckPending,
		Replicas: c.Replicas, MemoryStorage: c.Storage == "memory",
	}, nil
}

// Buckets returns the key-value buckets:
//   - catalog: key = tool name, value = Definition JSON; entries expire CatalogTTL after
//     their last refresh, with a delete marker so watchers see the removal;
//   - inflight: key = call id of a non-idempotent call that started, so it is never run
//     twice;
//   - approvals: key = <tool>.<call id>, the parked calls waiting for an approval.
func (c Config) Buckets() []jetstream.KeyValueConfig {
	c = c.WithDefaults()
	st := c.storage()
	return []jetstream.KeyValueConfig{
		{Bucket: BucketCatalog, Description: "toolfleet tool catalog: definitions served by live executors",
			History: 1, TTL: c.CatalogTTL.D(), LimitMarkerTTL: c.CatalogTTL.D(),
			Storage: st, Replicas: c.Replicas, MaxValueSize: c.MaxMsgSize},
		{Bucket: BucketInflight, Description: "toolfleet started non-idempotent calls",
			History: 1, TTL: c.InflightMaxAge.D(), Storage: st, Replicas: c.Replicas},
		{Bucket: BucketApprovals, Description: "toolfleet calls waiting for approval",
			History: 1, TTL: c.ApprovalsMaxAge.D(), Storage: st, Replicas: c.Replicas,
			MaxValueSize: c.MaxMsgSize + HeaderAllowance},
	}
}

// EmbeddingsBucket is where picker replicas share tool vectors, key = model and
// definition hash, value = little-endian float32s. Entries never expire: a vector is
// valid as long as its key. Only pickers create it.
func (c Config) EmbeddingsBucket() jetstream.KeyValueConfig {
	c = c.WithDefaults()
	return jetstream.KeyValueConfig{Bucket: BucketEmbeddings,
		Description: "toolfleet picker: tool embeddings by model and definition hash", Replicas: c.Replicas}
}

// Durable consumers of the planner, shared by all its replicas.
const (
	PlannerStepsConsumer     = "toolfleet-planner"
	PlannerResultsConsumer   = "toolfleet-planner-results"
	PlannerApprovalsConsumer = "toolfleet-planner-approvals"
)

// plannerMaxAckPending bounds the messages in flight on each planner consumer, across
// replicas.
const plannerMaxAckPending = 1000

// PlannerConsumer returns the streams (one, or each results shard) and the configuration of the planner's durable
// consumer name, shared by all planner replicas: [PlannerStepsConsumer] reads every run
// step waiting in the plan stream; [PlannerResultsConsumer] and
// [PlannerApprovalsConsumer] read results and approval requests from new ones on (a run's
// are published after the consumer exists), not from the streams' whole history.
// Explicit acks within AckWait, never given up on.
func (c Config) PlannerConsumer(name string) (streams []string, cc jetstream.ConsumerConfig, err error) {
	c = c.WithDefaults()
	var filter string
	deliver := jetstream.DeliverNewPolicy
	switch name {
	case PlannerStepsConsumer:
		streams, filter, deliver = []string{StreamPlan}, AllPlanSteps, jetstream.DeliverAllPolicy
	case PlannerResultsConsumer:
		streams, filter = c.ResultStreams(), AllResults
	case PlannerApprovalsConsumer:
		streams, filter = []string{StreamEvents}, AllApprovalRequests
	default:
		return nil, cc, fmt.Errorf("events config: %q is not a planner consumer", name)
	}
	return streams, jetstream.ConsumerConfig{
		Durable: name, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: c.AckWait.D(), MaxDeliver: -1, MaxAckPending: plannerMaxAckPending, DeliverPolicy: deliver,
	}, nil
}

// PlanStream is the planner's work queue of run steps ([PlanSubject]): one message "take
// step N of run R" per step, consumed by whichever planner replica is free.
func (c Config) PlanStream() jetstream.StreamConfig {
	c = c.WithDefaults()
	return jetstream.StreamConfig{Name: StreamPlan, Description: "toolfleet run steps waiting for a planner",
		Subjects: []string{AllPlanSteps}, Retention: jetstream.WorkQueuePolicy, Storage: c.storage(),
		Replicas: c.Replicas, MaxAge: c.CallsMaxAge.D(), Duplicates: c.DuplicateWindow.D()}
}

// RunsBucket holds each planner run's control state (status, step, counters, the
// current step's calls without their arguments or outputs), key = run id. Its stream is
// the run's journal ([Config.JournalStream]), which also holds the rest of the run.
func (c Config) RunsBucket() jetstream.KeyValueConfig {
	c = c.WithDefaults()
	return jetstream.KeyValueConfig{Bucket: BucketRuns, Description: "toolfleet run state", History: 1,
		TTL: c.RunsMaxAge.D(), Storage: c.storage(), Replicas: c.Replicas}
}

// StreamJournal is the planner runs' journal ([Config.JournalStream]): the stream of the
// runs bucket, whose subjects also take the run log, AllRunLog,
// toolfleet.runlog.<run>.<kind>[.<more>].
//
// StreamRunLog is the stream that held the run log before it joined the journal; a
// planner that finds it copies its records into the journal and retires it.
const (
	StreamJournal = "KV_" + BucketRuns
	StreamRunLog  = "TOOLFLEET_RUNLOG"
	AllRunLog     = "toolfleet.runlog.>"
)

// JournalStream is the stream of [Config.RunsBucket] with the run log in it: one stream
// holds each run's control state ($KV.toolfleet-runs.<run>, changed by compare-and-set)
// and what the run writes once and never changes (AllRunLog: its input, and one record
// per step with the model's message, the calls it made and how the previous step's calls
// ended). Sharing a stream lets a step store its record and its control state in one
// atomic batch (AllowAtomicPublish): both or neither, the record written only if its
// subject has none (Nats-Expected-Last-Subject-Sequence: 0) and the state only if it is
// still at the revision the step started from. The control state holds only the run's
// small control data and points into the log, so a run's state write does not grow with
// its length. Values and records are kept RunsMaxAge plus a day (the longest a run may
// last) after they were written, so that a run's first records outlive its last state;
// direct get is allowed so a record is one request. The runs' tool outputs are not
// copied here: they are read from the results stream, so a run shows them as long as
// ResultsMaxAge keeps them.
//
// The other settings are those nats.go gives a bucket of RunsBucket's configuration, so
// that the stream is still a key-value bucket to every client.
func (c Config) JournalStream() jetstream.StreamConfig {
	c = c.WithDefaults()
	kv := c.RunsBucket()
	return jetstream.StreamConfig{Name: StreamJournal, Description: "toolfleet run journal: state, inputs and steps of planner runs",
		Subjects: []string{"$KV." + BucketRuns + ".>", AllRunLog}, MaxMsgsPerSubject: int64(kv.History),
		MaxBytes: -1, MaxAge: kv.TTL + 24*time.Hour, MaxMsgSize: -1, Storage: kv.Storage, Replicas: kv.Replicas,
		AllowRollup: true, DenyDelete: true, Duplicates: 2 * time.Minute, MaxMsgs: -1, MaxConsumers: -1,
		AllowDirect: true, Discard: jetstream.DiscardNew, AllowAtomicPublish: true}
}
