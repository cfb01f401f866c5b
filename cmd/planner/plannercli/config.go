package plannercli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// DefaultHTTPAddr is the API's default listen address.
const DefaultHTTPAddr = ":8080"

// Config is the planner program's configuration.
type Config struct {
	NATS natsconn.Config
	// HTTPAddr is the API's listen address.
	HTTPAddr string
	// Token, when set, protects the API with a bearer token; its holder is anonymous.
	Token string
	// Tokens maps more bearer tokens (by SHA-256) to the tenant and role their holders
	// act with, from the tokens file (-api-tokens, see plannerapi.LoadTokens).
	Tokens map[string]events.Identity
	// OperatorRoles may act on other roles' runs of their tenant (see
	// planner.Config.OperatorRoles).
	OperatorRoles []string
	// ModelRoles restricts models to roles (see planner.Config.ModelRoles), from
	// -model-roles "model=role|role" (repeatable) or TOOLFLEET_MODEL_ROLES (entries
	// separated by commas).
	ModelRoles map[string][]string
	// Scripts are scripted models by name, "name=path".
	Scripts []string
	// StreamReplicas is the replicas of the streams and buckets the planner creates.
	StreamReplicas int
	// Shards is how many streams calls and results are each split over (every part of
	// a fleet must agree; see events.Config.Shards).
	Shards int
	// UsePicker asks the toolfleet-picker service for candidates on large tool sets.
	UsePicker bool
	// Usage publishes a usage record for every call that returns ok, for pickers to learn
	// from (planner.Config.NoUsage is its opposite).
	Usage bool
	// Prices is the price table of models and tools (-prices, see planner.LoadPrices).
	Prices planner.PriceTable
	// StepLease is how long a step held by a replica that died waits before another
	// replica takes it (planner.Config.StepLease); the same on every replica.
	StepLease time.Duration
	// Admission bounds the planner's admission of new runs.
	Admission
	// Ops is the ops server's address and the log level, as in every program.
	Ops ops.Config
	// Tracing is what the planner traces with: [Run] sets it up from the OTEL_*
	// variables (telemetry.Setup). Nil leaves the planner's default, the global
	// provider.
	Tracing *telemetry.Tracing
}

// Parse reads the configuration from args (without the program name) and the
// environment. With -h it returns flag.ErrHelp after writing the usage to out.
func Parse(args []string, out io.Writer) (Config, error) {
	var c Config
	var env envflag.Env
	fs := flag.NewFlagSet("planner", flag.ContinueOnError)
	fs.SetOutput(out)
	ops.Usage(fs, `The toolfleet planner: it runs agents' tool loops (asks the model, sends its
calls to the fleet, gathers the results) and serves the HTTP API, the inspector
(/ui/) and the MCP edge (/mcp).
The model comes from TOOLFLEET_MODEL, e.g. openai/gpt-4o-mini,
anthropic/claude-sonnet-4-5 or ollama/llama3.1, with its key from the provider's
variable (OPENAI_API_KEY, ANTHROPIC_API_KEY); -script adds scripted models.
TOOLFLEET_API_TOKEN (one token) or -api-tokens protect the API. Each flag's default
is its TOOLFLEET_* variable; the NATS password comes only from TOOLFLEET_NATS_PASSWORD.`)
	c.NATS.Register(fs)
	c.NATS.Name = "toolfleet-planner"
	fs.StringVar(&c.HTTPAddr, "http-addr", envflag.String("TOOLFLEET_HTTP_ADDR", DefaultHTTPAddr), "HTTP API listen address (env TOOLFLEET_HTTP_ADDR)")
	c.Token = os.Getenv("TOOLFLEET_API_TOKEN") // never a flag: flags show in process lists
	tokensFile := fs.String("api-tokens", os.Getenv("TOOLFLEET_API_TOKENS_FILE"),
		"a JSON file mapping API bearer tokens to the tenant and role their holders act with (env TOOLFLEET_API_TOKENS_FILE)")
	envflag.OperatorRoles(fs, &c.OperatorRoles)
	var modelRoles []string
	if v := os.Getenv("TOOLFLEET_MODEL_ROLES"); v != "" {
		modelRoles = envflag.List(v)
	}
	fs.Func("model-roles", "`model=role|role`: only these roles may use the model, to start or fork a run (repeatable; env TOOLFLEET_MODEL_ROLES, comma-separated)",
		func(s string) error { modelRoles = append(modelRoles, s); return nil })
	pricesFile := fs.String("prices", os.Getenv("TOOLFLEET_PRICES_FILE"),
		"a YAML or JSON price table: models' prices per million input and output tokens, and tools' prices per call, for runs' costs and limits.costBudget (env TOOLFLEET_PRICES_FILE)")
	fs.Func("script", "a scripted model, name=path to its YAML or JSON script (repeatable)", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("want name=path, got %q", s)
		}
		c.Scripts = append(c.Scripts, s)
		return nil
	})
	fs.IntVar(&c.StreamReplicas, "stream-replicas", env.Int("TOOLFLEET_STREAM_REPLICAS", 1), "replicas of streams and buckets: 1 on one server, 3 in a cluster (env TOOLFLEET_STREAM_REPLICAS)")
	fs.IntVar(&c.Shards, "shards", env.Int("TOOLFLEET_SHARDS", 1), "streams the calls and the results are each split over; the NATS server must map calls to them (see events.Config.MappingsConf; env TOOLFLEET_SHARDS)")
	fs.BoolVar(&c.UsePicker, "picker", true, "ask the toolfleet-picker service for candidates when a run has many tools")
	fs.BoolVar(&c.Usage, "usage", true, "publish a usage record (request, tool) for every call that returns ok, for pickers to learn from")
	fs.DurationVar(&c.StepLease, "step-lease", env.Duration("TOOLFLEET_STEP_LEASE", planner.DefaultStepLease),
		"how long a step, result or approval request held by a planner replica that died waits before another replica takes it; renewed every third of it while held, the same on every replica (env TOOLFLEET_STEP_LEASE)")
	c.Admission.Register(fs, &env)
	opsFlags := ops.Register(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	errs := []error{env.Err()}
	var err error
	if c.Ops, err = opsFlags.Config(); err != nil {
		errs = append(errs, err)
	}
	if *tokensFile != "" {
		if c.Tokens, err = plannerapi.LoadTokens(*tokensFile); err != nil {
			errs = append(errs, fmt.Errorf("-api-tokens (TOOLFLEET_API_TOKENS_FILE): %w", err))
		}
	}
	if *pricesFile != "" {
		if c.Prices, err = planner.LoadPrices(*pricesFile); err != nil {
			errs = append(errs, fmt.Errorf("-prices (TOOLFLEET_PRICES_FILE): %w", err))
		}
	}
	if err := events.ValidateRoles(c.OperatorRoles); err != nil {
		errs = append(errs, fmt.Errorf("-operator-roles (TOOLFLEET_OPERATOR_ROLES): %w", err))
	}
	if c.ModelRoles, err = parseModelRoles(modelRoles); err != nil {
		errs = append(errs, fmt.Errorf("-model-roles (TOOLFLEET_MODEL_ROLES): %w", err))
	}
	if c.Shards < 1 || c.Shards > events.MaxShards {
		errs = append(errs, fmt.Errorf("-shards (TOOLFLEET_SHARDS): must be 1 to %d, got %d", events.MaxShards, c.Shards))
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("-stream-replicas (TOOLFLEET_STREAM_REPLICAS): must be 1 to 5, got %d", c.StreamReplicas))
	}
	if c.StepLease < time.Second {
		errs = append(errs, fmt.Errorf("-step-lease (TOOLFLEET_STEP_LEASE): must be at least 1s, got %s", c.StepLease))
	}
	errs = append(errs, c.Admission.Validate())
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("-http-addr (TOOLFLEET_HTTP_ADDR) is empty: the API needs an address"))
	}
	errs = append(errs, c.NATS.Validate())
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Admission bounds the planner's admission of new runs (planner.Config.MaxStarting and
// MaxStall): -max-starting and -max-stall, of the planner program and of toolfleet dev.
// The zero Admission leaves the planner's defaults.
type Admission struct {
	MaxStarting int
	MaxStall    time.Duration
}

// Register adds -max-starting and -max-stall to fs, their defaults read from
// TOOLFLEET_MAX_STARTING and TOOLFLEET_MAX_STALL through env.
func (a *Admission) Register(fs *flag.FlagSet, env *envflag.Env) {
	fs.IntVar(&a.MaxStarting, "max-starting", env.Int("TOOLFLEET_MAX_STARTING", 256), "the most runs started at once; past it a new run is answered 429 (env TOOLFLEET_MAX_STARTING)")
	fs.DurationVar(&a.MaxStall, "max-stall", env.Duration("TOOLFLEET_MAX_STALL", time.Second),
		"how long writes may wait for JetStream to acknowledge earlier ones before new runs are answered 429 (env TOOLFLEET_MAX_STALL)")
}

// Validate returns every problem of the values Register parsed, at once; nil for none.
func (a Admission) Validate() error {
	var errs []error
	if a.MaxStarting < 1 {
		errs = append(errs, fmt.Errorf("-max-starting (TOOLFLEET_MAX_STARTING): must be at least 1, got %d", a.MaxStarting))
	}
	if a.MaxStall <= 0 {
		errs = append(errs, fmt.Errorf("-max-stall (TOOLFLEET_MAX_STALL): must be a positive duration, got %s", a.MaxStall))
	}
	return errors.Join(errs...)
}

// Events is the JetStream settings the planner creates streams with.
func (c Config) Events() events.Config {
	return events.Config{Replicas: c.StreamReplicas, Shards: c.Shards}
}

// Models builds the models a planner serves: the one TOOLFLEET_MODEL names (with its
// keys from the environment), and every scripted model. It is an error to have none.
func (c Config) Models() (map[string]provider.Model, string, error) {
	models := map[string]provider.Model{}
	def := ""
	m, err := provider.FromEnv()
	switch {
	case err == nil:
		models[m.Name()] = m
		def = m.Name()
	case !errors.Is(err, provider.ErrNoModel):
		return nil, "", err
	}
	for _, s := range c.Scripts {
		name, path, _ := strings.Cut(s, "=")
		sm, err := provider.LoadScripted(path)
		if err != nil {
			return nil, "", fmt.Errorf("-script %s: %w", s, err)
		}
		models[name] = sm
		if def == "" {
			def = name
		}
	}
	if len(models) == 0 {
		return nil, "", fmt.Errorf("no model: set TOOLFLEET_MODEL (e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, ollama/llama3.1) or give -script name=path")
	}
	return models, def, nil
}

// parseModelRoles reads "model=role|role" entries.
func parseModelRoles(entries []string) (map[string][]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := map[string][]string{}
	for _, e := range entries {
		model, roles, ok := strings.Cut(e, "=")
		model = strings.TrimSpace(model)
		if !ok || model == "" || strings.TrimSpace(roles) == "" {
			return nil, fmt.Errorf("want model=role|role, got %q", e)
		}
		for r := range strings.SplitSeq(roles, "|") {
			if r = strings.TrimSpace(r); r != "" {
				out[model] = append(out[model], r)
			}
		}
		if err := events.ValidateRoles(out[model]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
