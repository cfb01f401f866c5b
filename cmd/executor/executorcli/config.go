package executorcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/pkg/builtin"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/mcptool"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// Defaults of the executor's settings.
const (
	DefaultGracePeriod = 30 * time.Second
)

// DefaultConcurrency is -concurrency's default: [executor.DefaultConcurrency], 16 calls
// per core (GOMAXPROCS) and at least 256, enough for a replica to fill its share of a
// stream (see there).
var DefaultConcurrency = executor.DefaultConcurrency()

// Config is the executor binary's configuration.
type Config struct {
	NATS natsconn.Config
	// Concurrency bounds the calls of one tool running at once on this replica.
	Concurrency int
	// Builtins names the built-in tools to serve; nil means every configured one, an
	// empty non-nil slice none.
	Builtins []string
	// SandboxRoot is the directory the file tools are confined to; empty leaves them out.
	SandboxRoot string
	// HTTPAllowlist are the host patterns of http_get; empty leaves it out.
	HTTPAllowlist []string
	// ToolsFile is a tools file to serve beside the built-ins; empty for none.
	ToolsFile string
	// PolicyHooks are the policy hooks of the tools file's tools, by tool: [Config.Tools]
	// returns them, and [New] makes the executor ask them.
	PolicyHooks map[string]events.Hook
	// Ops is the ops server's address and the log level, as in every program.
	Ops ops.Config
	// Tracing is what the executor traces with: [Run] sets it up from the OTEL_*
	// variables (telemetry.Setup). Nil leaves the executor's default, the global
	// provider.
	Tracing *telemetry.Tracing
	// GracePeriod is how long in-flight calls may finish after SIGTERM.
	GracePeriod time.Duration
	// ExecutorID names this replica in results and logs; defaults to the host name (the
	// pod name in Kubernetes).
	ExecutorID string
	// StreamReplicas is the replica count of the streams and buckets this executor
	// creates if they do not exist yet: 1 on one server, 3 in a cluster.
	StreamReplicas int
	// Shards is how many streams calls and results are each split over (every part of
	// a fleet must agree; see events.Config.Shards).
	Shards int
	// OperatorRoles may answer the approvals of, and cancel, other roles' calls of their
	// tenant (executor.WithOperatorRoles): the planner's operator roles (every part of a
	// fleet must agree).
	OperatorRoles []string
}

// Parse reads the configuration from args (without the program name) and the
// environment, and validates it. With -h it returns flag.ErrHelp after writing the usage
// to out.
func Parse(args []string, out io.Writer) (Config, error) {
	var c Config
	var errs []error
	var env envflag.Env
	fs := flag.NewFlagSet("executor", flag.ContinueOnError)
	fs.SetOutput(out)
	ops.Usage(fs, `The toolfleet executor: it serves tools to the fleet over NATS JetStream, the
built-in tools and those of a tools file (command, HTTP and MCP tools, composites),
one durable consumer per tool, and stores one result per call.
Each flag's default is its TOOLFLEET_* variable; the NATS password comes only from
TOOLFLEET_NATS_PASSWORD.`)
	c.NATS.Register(fs)
	c.NATS.Name = "toolfleet-executor"

	concurrency := env.Int("TOOLFLEET_CONCURRENCY", DefaultConcurrency)
	grace := env.Duration("TOOLFLEET_GRACE_PERIOD", DefaultGracePeriod)
	replicas := env.Int("TOOLFLEET_STREAM_REPLICAS", 1)
	host, _ := os.Hostname() // none: the default is empty, refused clearly unless -executor-id names the replica
	fs.IntVar(&c.Concurrency, "concurrency", concurrency, "calls of one tool run at once by this replica (env TOOLFLEET_CONCURRENCY)")
	builtins := fs.String("builtins", envflag.String("TOOLFLEET_BUILTINS", "all"), `built-in tools to serve, comma-separated, or "all" or "none" (env TOOLFLEET_BUILTINS)`)
	fs.StringVar(&c.SandboxRoot, "sandbox-root", os.Getenv("TOOLFLEET_SANDBOX_ROOT"), "directory read_file, list_dir and write_file are confined to; empty leaves them out (env TOOLFLEET_SANDBOX_ROOT)")
	allow := fs.String("http-allowlist", os.Getenv("TOOLFLEET_HTTP_ALLOWLIST"), "hosts http_get may reach, comma-separated (example.com, *.example.com, host:port); empty leaves http_get out (env TOOLFLEET_HTTP_ALLOWLIST)")
	fs.StringVar(&c.ToolsFile, "tools-file", os.Getenv("TOOLFLEET_TOOLS_FILE"), "YAML or JSON file of command and HTTP tools and MCP servers (env TOOLFLEET_TOOLS_FILE)")
	opsFlags := ops.Register(fs, ops.ExecutorAlias)
	fs.DurationVar(&c.GracePeriod, "grace-period", grace, "how long in-flight calls may finish on SIGTERM (env TOOLFLEET_GRACE_PERIOD)")
	fs.StringVar(&c.ExecutorID, "executor-id", envflag.String("TOOLFLEET_EXECUTOR_ID", host), "name of this replica in results and logs (env TOOLFLEET_EXECUTOR_ID; default the host name)")
	fs.IntVar(&c.StreamReplicas, "stream-replicas", replicas, "replicas of streams and buckets created by this executor: 1 on one server, 3 in a cluster (env TOOLFLEET_STREAM_REPLICAS)")
	envflag.OperatorRoles(fs, &c.OperatorRoles)
	fs.IntVar(&c.Shards, "shards", env.Int("TOOLFLEET_SHARDS", 1), "streams the calls and the results are each split over; the NATS server must map calls to them (see events.Config.MappingsConf; env TOOLFLEET_SHARDS)")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if err := env.Err(); err != nil {
		errs = append(errs, err)
	}
	var err error
	if c.Ops, err = opsFlags.Config(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}

	switch b := strings.TrimSpace(*builtins); b {
	case "all", "":
	case "none":
		c.Builtins = []string{}
	default:
		c.Builtins = envflag.List(b)
	}
	c.HTTPAllowlist = envflag.List(*allow)
	return c, c.Validate()
}

// Validate checks every setting and reports all problems at once.
func (c Config) Validate() error {
	var errs []error
	if err := c.NATS.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("-concurrency (TOOLFLEET_CONCURRENCY): must be at least 1, got %d", c.Concurrency))
	}
	if c.GracePeriod < 0 {
		errs = append(errs, fmt.Errorf("-grace-period (TOOLFLEET_GRACE_PERIOD): cannot be negative, got %s", c.GracePeriod))
	}
	if c.StreamReplicas < 1 || c.StreamReplicas > 5 {
		errs = append(errs, fmt.Errorf("-stream-replicas (TOOLFLEET_STREAM_REPLICAS): must be 1 to 5, got %d", c.StreamReplicas))
	}
	if c.Shards < 1 || c.Shards > events.MaxShards {
		errs = append(errs, fmt.Errorf("-shards (TOOLFLEET_SHARDS): must be 1 to %d, got %d", events.MaxShards, c.Shards))
	}
	if err := events.ValidateRoles(c.OperatorRoles); err != nil {
		errs = append(errs, fmt.Errorf("-operator-roles (TOOLFLEET_OPERATOR_ROLES): %w", err))
	}
	if c.ExecutorID == "" {
		errs = append(errs, errors.New("executor id is empty (set -executor-id or TOOLFLEET_EXECUTOR_ID)"))
	}
	if c.Builtins == nil || len(c.Builtins) > 0 {
		if err := c.BuiltinConfig().Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ToolsFile != "" {
		switch ext := strings.ToLower(filepath.Ext(c.ToolsFile)); ext {
		case ".yaml", ".yml", ".json":
			if st, err := os.Stat(c.ToolsFile); err != nil {
				errs = append(errs, fmt.Errorf("tools file: %w", err))
			} else if st.IsDir() {
				errs = append(errs, fmt.Errorf("tools file %s is a directory", c.ToolsFile))
			}
		default:
			errs = append(errs, fmt.Errorf("tools file %s: extension %q is neither .yaml, .yml nor .json", c.ToolsFile, ext))
		}
	}
	return errors.Join(errs...)
}

// BuiltinConfig is the configuration of the built-in tools.
func (c Config) BuiltinConfig() builtin.Config {
	return builtin.Config{Enable: c.Builtins, SandboxRoot: c.SandboxRoot, HTTPAllowlist: c.HTTPAllowlist}
}

// Registry builds the registry the executor serves: the built-ins, then the tools file's
// tools. A tools file tool may not take a built-in's name. A tools file that declares
// mcpServers (their tools exist only once connected) or policy hooks (a registry does
// not carry them) is refused here: use [Config.Tools].
func (c Config) Registry() (*tools.Registry, error) {
	reg, err := c.builtins()
	if err != nil {
		return nil, err
	}
	if c.ToolsFile != "" {
		specs, err := toolsfile.Load(c.ToolsFile)
		if err != nil {
			return nil, err
		}
		if len(toolsfile.PolicyHooks(specs)) > 0 {
			// Served without them, the tools would run unasked: refused, not ignored.
			return nil, fmt.Errorf("%w %s: its tools declare policy hooks, which only Config.Tools returns for the executor to ask", toolsfile.ErrInvalidFile, c.ToolsFile)
		}
		if err := toolsfile.Register(reg, specs); err != nil {
			return nil, err
		}
	}
	return nonEmpty(reg)
}

// Tools builds the registry the executor serves, as [Config.Registry] does, with the
// policy hooks of the tools file's tools (set them as the Config's PolicyHooks before
// [New]), and starts the tools file's MCP servers: it connects to each (retrying up to its connectTimeout)
// and registers its tools, or fails saying which server and why; ctx bounds the start.
// The servers run, and keep their tools fresh in the registry, until they are closed:
// close them once the executor has stopped (its calls in flight may need them).
// onChange (nil: none) hears of each later change of a server's tools; the registry has
// it already, but a running executor serves only the tools it started with (see [Run]).
func (c Config) Tools(ctx context.Context, log zerolog.Logger, onChange func(server string, c mcptool.Change)) (*tools.Registry, map[string]events.Hook, toolsfile.MCPServers, error) {
	reg, err := c.builtins()
	if err != nil {
		return nil, nil, nil, ops.ConfigError(err)
	}
	var servers toolsfile.MCPServers
	var hooks map[string]events.Hook
	if c.ToolsFile != "" {
		file, err := toolsfile.LoadFile(c.ToolsFile)
		if err != nil {
			return nil, nil, nil, ops.ConfigError(err)
		}
		warnUnconfinedRoot(log, file, os.Geteuid())
		servers, err = file.Start(ctx, reg, log, onChange)
		if errors.Is(err, executor.ErrMissingSecret) {
			return nil, nil, nil, ops.ConfigError(err) // exit 2; an MCP server that cannot start is 1
		}
		if err != nil {
			return nil, nil, nil, err
		}
		hooks = toolsfile.PolicyHooks(file.Tools)
		logSandboxLauncher(log, file)
	}
	if _, err := nonEmpty(reg); err != nil {
		servers.Close()
		return nil, nil, nil, ops.ConfigError(err)
	}
	return reg, hooks, servers, nil
}

// warnUnconfinedRoot warns, when the executor runs as root (euid 0), of the command
// tools and stdio servers of file that would run as root with every power it has.
func warnUnconfinedRoot(log zerolog.Logger, file *toolsfile.File, euid int) {
	if euid != 0 {
		return
	}
	if names := file.Unconfined(); len(names) > 0 {
		log.Warn().Strs("unconfined", names).Msg("the executor runs as root, so these command tools run as root with every power it has " +
			"(any file, other processes' memory and environment, the network): give each a sandbox or runAs: {uid, gid} in the tools file, " +
			"or run the executor as an unprivileged user")
	}
}

// logSandboxLauncher says, where file has sandboxed command tools, what they start
// through: the launcher program (probed now, once), or a re-exec of this binary, which
// first runs the init of every package it links; a launcher program installed or named
// but not used (missing, broken, of another build) is warned of.
func logSandboxLauncher(log zerolog.Logger, file *toolsfile.File) {
	names := file.Sandboxed()
	if len(names) == 0 {
		return
	}
	launcher, err := sandbox.Launcher()
	switch {
	case err != nil:
		log.Warn().Err(err).Strs("sandboxed", names).Msg("sandboxed command tools start through a re-exec of this binary, " +
			"which costs tens of milliseconds more per call: install " + sandbox.LauncherName + " of this build beside it, or name it in " + sandbox.LauncherEnv)
	case launcher == sandbox.SelfLauncher:
		log.Info().Strs("sandboxed", names).Msg("sandboxed command tools start through a re-exec of this binary: install " +
			sandbox.LauncherName + " beside it (or name it in " + sandbox.LauncherEnv + ") to start them tens of milliseconds sooner")
	default:
		log.Info().Strs("sandboxed", names).Str("launcher", launcher).Msg("sandboxed command tools start through the launcher program")
	}
}

func (c Config) builtins() (*tools.Registry, error) {
	reg := tools.NewRegistry()
	if c.Builtins == nil || len(c.Builtins) > 0 {
		if err := builtin.Register(reg, c.BuiltinConfig()); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func nonEmpty(reg *tools.Registry) (*tools.Registry, error) {
	if reg.Len() == 0 {
		return nil, errors.New("no tool to serve: enable built-ins or give a tools file")
	}
	return reg, nil
}
