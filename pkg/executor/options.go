package executor

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// ErrInvalidOption is wrapped by every error an [Option] returns.
var ErrInvalidOption = errors.New("executor: invalid option")

// Option configures an [Executor]; options validate their argument.
type Option func(o *options) error

type options struct {
	concurrency       int
	concurrencyByTool map[string]int
	maxAckPending     int
	log               zerolog.Logger
	grace             time.Duration
	id                string
	approvalTimeout   time.Duration
	noSuchToolAfter   time.Duration
	defaultTimeout    time.Duration
	startedAfter      time.Duration
	stream            events.Config
	metrics           prometheus.Registerer
	limitLease        time.Duration          // see WithLimitLease; 0 is the default
	policy            map[string]events.Hook // by tool; see WithPolicyHook
	tracerProvider    trace.TracerProvider   // see WithTracerProvider; nil is the global one
	traceContent      bool                   // see WithTraceContent
	operatorRoles     []string               // see WithOperatorRoles
}

func defaultOptions() options {
	return options{
		concurrency:     DefaultConcurrency(),
		log:             zerolog.Nop(),
		grace:           30 * time.Second,
		id:              nuid.Next(),
		approvalTimeout: 15 * time.Minute,
		noSuchToolAfter: 10 * time.Second,
		defaultTimeout:  time.Minute,
		startedAfter:    DefaultStartedAfter,
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}

// WithOperatorRoles names the roles that may answer the approvals of, and cancel, calls
// made by other roles of their tenant (events.MayAct); without it only a call's owner's
// role may. Give every executor and planner of a fleet the same roles (the planner's
// planner.Config.OperatorRoles; -operator-roles, TOOLFLEET_OPERATOR_ROLES): the planner
// accepts an operator's approval or cancel and publishes it with the operator's
// identity, and an executor without the role would refuse it.
func WithOperatorRoles(roles ...string) Option {
	return func(o *options) error {
		if err := events.ValidateRoles(roles); err != nil {
			return invalid("operator roles: %v", err)
		}
		o.operatorRoles = roles
		return nil
	}
}

// WithConcurrency bounds the calls of one tool running at once on this replica. Defaults
// to [DefaultConcurrency] (16 per core, at least 256). The fleet-wide bound of a tool is
// the consumer's max ack pending ([WithMaxAckPending]).
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return invalid("concurrency must be at least 1, got %d", n)
		}
		o.concurrency = n
		return nil
	}
}

// WithToolConcurrency overrides [WithConcurrency] for one tool.
func WithToolConcurrency(tool string, n int) Option {
	return func(o *options) error {
		if n < 1 {
			return invalid("concurrency of %s must be at least 1, got %d", tool, n)
		}
		if o.concurrencyByTool == nil {
			o.concurrencyByTool = map[string]int{}
		}
		o.concurrencyByTool[tool] = n
		return nil
	}
}

// WithMaxAckPending bounds the calls of one tool in flight across every replica (the
// durable consumer's max ack pending). Defaults to the stream config's MaxAckPending
// (1000).
func WithMaxAckPending(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return invalid("max ack pending must be at least 1, got %d", n)
		}
		o.maxAckPending = n
		return nil
	}
}

// WithLogger sets the logger. Defaults to zerolog.Nop().
func WithLogger(l zerolog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// WithGracePeriod bounds how long Run waits, once its context ends, for calls in flight
// to finish; calls still running then are cancelled and handed back to JetStream for
// another replica. Defaults to 30s; 0 hands them back at once.
func WithGracePeriod(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalid("grace period must not be negative, got %s", d)
		}
		o.grace = d
		return nil
	}
}

// WithExecutorID names this replica in results and logs. Defaults to a random NUID.
func WithExecutorID(id string) Option {
	return func(o *options) error {
		if err := events.ValidateID("executor id", id); err != nil {
			return invalid("%v", err)
		}
		o.id = id
		return nil
	}
}

// WithApprovalTimeout bounds how long a call of an unsafe tool waits for its approval
// before it is denied. Defaults to 15 minutes; a call's own deadline, when earlier, wins.
func WithApprovalTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("approval timeout must be positive, got %s", d)
		}
		o.approvalTimeout = d
		return nil
	}
}

// WithNoSuchToolTimeout is how old a call of a tool absent from the catalog must be
// before this executor answers it no_such_tool. Defaults to 10s. The wait lets an
// executor that serves the tool start (or come back) first.
func WithNoSuchToolTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 100*time.Millisecond {
			return invalid("no-such-tool timeout must be at least 100ms, got %s", d)
		}
		o.noSuchToolAfter = d
		return nil
	}
}

// WithDefaultTimeout bounds one attempt of a tool whose definition has no timeout.
// Defaults to 1 minute.
func WithDefaultTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return invalid("default timeout must be positive, got %s", d)
		}
		o.defaultTimeout = d
		return nil
	}
}

// DefaultStartedAfter is how long a call runs before its tool_started event is
// published, unless [WithStartedAfter] says otherwise.
const DefaultStartedAfter = 20 * time.Millisecond

// WithStartedAfter sets how long an attempt of a call runs before the executor announces
// it on the call's run (a tool_started event whose time is when it started; see
// progress.go). A call that ends sooner, and reports no progress, is not announced: its
// result says when it started (started_at), and the events stream stores one message
// less per call (about 7% of an executor's CPU per call of a tool that does nothing). 0
// announces every attempt as it starts. Defaults to [DefaultStartedAfter].
func WithStartedAfter(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return invalid("started-after delay must not be negative, got %s", d)
		}
		o.startedAfter = d
		return nil
	}
}

// WithStreamConfig sets the JetStream settings (replicas, ack wait, max deliver, ...)
// that the executor ensures and uses. Defaults to events.DefaultConfig().
func WithStreamConfig(c events.Config) Option {
	return func(o *options) error {
		if err := c.Validate(); err != nil {
			return invalid("%v", err)
		}
		o.stream = c
		return nil
	}
}

// WithMetrics registers the executor's Prometheus metrics on r. Defaults to none.
func WithMetrics(r prometheus.Registerer) Option {
	return func(o *options) error {
		if r == nil {
			return invalid("metrics registerer is nil")
		}
		o.metrics = r
		return nil
	}
}
