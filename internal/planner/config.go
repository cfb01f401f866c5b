package planner

import (
	"github.com/prometheus/client_golang/prometheus"

	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

// Picker narrows a large tool set to the tools that matter for an input. The planner asks
// it at each step when a run's tool set is larger than Config.PickThreshold.
type Picker interface {
	// Pick returns tools, best first, at most q.Max of them, with their scores and
	// reasons; the planner records them on the run.
	Pick(ctx context.Context, q PickQuery) ([]pick.Result, error)
}

// Config configures a Planner. The zero value of each field takes the default beside it,
// except Models, which must name at least one model.
type Config struct {
	// Models are the models a run may use, by name (the name a request gives in "model").
	Models map[string]provider.Model
	// DefaultModel is the model of a run that names none. Default: the only model, when
	// there is one.
	DefaultModel string
	// Events is the JetStream settings shared by every part.
	Events events.Config
	// Picker, when set, is asked for candidates when a run has more than PickThreshold
	// tools. Default: none (the model sees every tool of the run).
	Picker Picker
	// PickThreshold is the tool-set size above which the picker is asked. Default 20.
	PickThreshold int
	// PickMax is how many tools the picker returns. Default 8.
	PickMax int
	// NoUsage turns off the usage records pickers learn from (usage.go): by default,
	// every call that returns ok publishes its run's request and its tool.
	NoUsage bool
	// Prices are the price table of models and tool calls (see [PriceTable],
	// [LoadPrices]): a run's cost is counted when its model has a price, and
	// Limits.CostBudget needs one. Default: none.
	Prices PriceTable
	// ModelTimeout bounds one model call. Default 2m.
	ModelTimeout time.Duration
	// StepLease is how long a step, or a result or approval request being handled,
	// stays this replica's without a sign of life: the ack wait of the planner's
	// consumers and the length of a step's lease in its run's control state (see
	// local.go). A replica renews what it holds every third of it for as long as it
	// handles it, however long the model answers; one that dies has its steps taken by
	// another within StepLease (plus the sweeper's 250ms for a lease). Every replica
	// must use the same value: the consumers are shared. Default 3s; at least 1s.
	StepLease time.Duration
	// Source is the CloudEvents source of what the planner publishes. Default
	// "/toolfleet/planner".
	Source string
	// ID names this planner replica in logs. Default: the NATS client name or "planner".
	ID string
	// Log receives the planner's logs. Default: none.
	Log zerolog.Logger
	// Metrics, when set, receives the planner's Prometheus collectors: runs started and
	// finished by termination, model turns, model call latency, tokens by model and
	// tenant, cost by tenant, and whether its watches of the runs bucket and the catalog
	// follow them.
	Metrics prometheus.Registerer
	// OperatorRoles are the roles that may act on (follow up, change the tools of,
	// cancel, answer the approvals of) the runs of other roles of their tenant, besides
	// each run's owner; what they do never widens what the run may call (see auth.go).
	// Default: none (only a run's owner acts on it).
	OperatorRoles []string
	// ModelRoles restricts models to roles: a model named here may be used (by a start,
	// a fork, or as the default) only by a caller of one of its roles. Default: every
	// model for every caller.
	ModelRoles map[string][]string
	// TracerProvider makes the planner's spans: a run's invoke_agent span and a chat
	// span per model call, with the GenAI attributes. Default: the global provider
	// (otel.GetTracerProvider) as it is when New runs, a no-op one unless the program
	// set another. Traced or not, a run carries the trace context it started under
	// (Start's context, or its parent run's) to its calls, events and hooks.
	TracerProvider trace.TracerProvider
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxStarting is the most runs this replica starts at once (Start calls storing a
	// new run); past it, a new run is refused with a 429 [APIError] (see Backpressure in
	// the package doc). Default 256.
	MaxStarting int
	// MaxStall is how long the planner's writes may wait for room among its
	// unacknowledged publishes (JetStream acknowledging more slowly than the planner
	// writes) before new runs are refused with a 429 [APIError]; runs already started go
	// on, slowed down to the server's pace. Default 1s.
	MaxStall time.Duration
	// BeforeStepCommit, when set, is called between the parts of a step's atomic batch
	// and its commit (see Durability in the package doc), for fault-injection tests (a
	// planner, or the journal's leader, killed mid-batch); an error abandons the batch.
	BeforeStepCommit func(run string) error
}

// DefaultStepLease is Config.StepLease's default: a dead replica's steps move within
// it, well inside the 5s a run may wait for a replica that is gone.
const DefaultStepLease = 3 * time.Second

func (c Config) withDefaults() (Config, error) {
	if len(c.Models) == 0 {
		return c, fmt.Errorf("planner: no model configured")
	}
	if c.DefaultModel == "" && len(c.Models) == 1 {
		for name := range c.Models {
			c.DefaultModel = name
		}
	}
	if c.DefaultModel != "" {
		if _, ok := c.Models[c.DefaultModel]; !ok {
			return c, fmt.Errorf("planner: default model %q is not among the configured models", c.DefaultModel)
		}
	}
	for m := range c.ModelRoles {
		if _, ok := c.Models[m]; !ok {
			return c, fmt.Errorf("planner: ModelRoles names model %q, which is not among the configured models", m)
		}
	}
	c.Events = c.Events.WithDefaults()
	if c.PickThreshold == 0 {
		c.PickThreshold = 20
	}
	if c.PickMax == 0 {
		c.PickMax = 8
	}
	if c.MaxStarting < 0 || c.MaxStall < 0 {
		return c, fmt.Errorf("planner: MaxStarting and MaxStall must not be negative, got %d and %s", c.MaxStarting, c.MaxStall)
	}
	if c.MaxStarting == 0 {
		c.MaxStarting = 256
	}
	if c.MaxStall == 0 {
		c.MaxStall = time.Second
	}
	if c.ModelTimeout == 0 {
		c.ModelTimeout = 2 * time.Minute
	}
	if c.StepLease == 0 {
		c.StepLease = DefaultStepLease
	}
	if c.StepLease < time.Second {
		return c, fmt.Errorf("planner: StepLease must be at least 1s, got %s", c.StepLease)
	}
	if c.Source == "" {
		c.Source = "/toolfleet/planner"
	}
	if c.ID == "" {
		c.ID = "planner"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := c.Prices.Validate(); err != nil {
		return c, fmt.Errorf("planner: %w", err)
	}
	return c, nil
}
