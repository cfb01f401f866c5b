package toolfleetcli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/envflag"
	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
	"github.com/toolfleet/toolfleet/internal/telemetry"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// Command is a parsed all-in-one program: which one, with its options.
type Command struct {
	// Name is "demo", "dev" or "mcp".
	Name string
	Demo DemoOptions
	Dev  DevOptions
	MCP  MCPOptions
}

// Parse reads an all-in-one program's command line (after "toolfleet": "dev",
// "-nats-port", "4333") and the environment as `toolfleet` does, and returns the command
// without running it. Help and cobra's errors go to out; after help it returns
// flag.ErrHelp.
func Parse(args []string, out io.Writer) (Command, error) {
	if len(args) == 0 || !slices.Contains([]string{"demo", "dev", "mcp"}, args[0]) {
		return Command{}, errors.New("want a program: demo, dev or mcp")
	}
	var c Command
	err := flag.ErrHelp
	cl := &cli{stdout: out, stderr: out}
	cl.program = func(_ context.Context, configure func() (Command, error)) error {
		c, err = configure()
		return nil
	}
	if xerr := execute(context.Background(), cl.root(), args); xerr != nil {
		return Command{}, xerr
	}
	return c, err
}

// programFlags defines the flags of the all-in-one program name on fs, and returns what
// reads the command from them and the environment once cobra parsed them. They are Go
// flags because the pieces every program shares define theirs so (ops.Register,
// envflag.OperatorRoles, natsconn.Config.Register); cobra reads them through
// AddGoFlagSet, so that they parse, show and complete as every toolfleet command's.
func programFlags(name string, fs *flag.FlagSet) func() (Command, error) {
	if name == "mcp" {
		configure := mcpFlags(fs)
		return func() (Command, error) {
			o, err := configure()
			return Command{Name: "mcp", MCP: o}, err
		}
	}
	c := Command{Name: name}
	data := fs.String("data", "", "directory for JetStream's files (default: a temporary one, removed at exit)")
	httpAllow := fs.String("http-allow", "", "comma-separated hosts http_get may reach (default: none, and no http_get)")
	// Each program lists only its own flags.
	var verbose *bool
	var calls *int
	var opsFlags *ops.Flags
	var pricesFile *string
	var env envflag.Env
	if c.Name == "demo" {
		verbose = fs.Bool("v", false, "log the parts' warnings and errors to stderr")
		calls = fs.Int("calls", 3000, "tool calls in the load")
	}
	if c.Name == "dev" {
		fs.StringVar(&c.Dev.Host, "host", envflag.String("TOOLFLEET_DEV_HOST", "127.0.0.1"), "the address NATS, the planner API and the ops server bind; 0.0.0.0 inside a container (env TOOLFLEET_DEV_HOST)")
		fs.StringVar(&c.Dev.HTTPAddr, "http", ":8080", "the planner API's listen address; without a host, on -host")
		fs.IntVar(&c.Dev.Fleet.NATSPort, "nats-port", 4222, "the embedded NATS server's port on -host")
		opsFlags = ops.Register(fs)
		fs.StringVar(&c.Dev.Fleet.Model, "model", os.Getenv("TOOLFLEET_MODEL"),
			"the runs' default model, e.g. ollama/llama3.1, openai/gpt-4o-mini or scripted/<file> (env TOOLFLEET_MODEL; default: the scripted demo model)")
		pricesFile = fs.String("prices", os.Getenv("TOOLFLEET_PRICES_FILE"),
			"a YAML or JSON price table: models' prices per million input and output tokens, and tools' prices per call, for runs' costs and limits.costBudget (env TOOLFLEET_PRICES_FILE)")
		fs.StringVar(&c.Dev.Fleet.ToolsFile, "tools-file", os.Getenv("TOOLFLEET_TOOLS_FILE"),
			"YAML or JSON file of command and HTTP tools and MCP servers, served beside the built-ins (env TOOLFLEET_TOOLS_FILE)")
		envflag.OperatorRoles(fs, &c.Dev.Fleet.OperatorRoles)
		c.Dev.Fleet.Admission.Register(fs, &env) // the planner program's flags
	}
	return func() (Command, error) {
		fleet := Options{DataDir: *data, Log: zerolog.Nop()}
		if *httpAllow != "" {
			fleet.HTTPAllowlist = strings.Split(*httpAllow, ",")
		}
		switch c.Name {
		case "demo":
			if *verbose {
				fleet.Log = ops.NewLogger(os.Stderr, "toolfleet", zerolog.WarnLevel)
			}
			st, _ := os.Stderr.Stat()
			c.Demo = DemoOptions{Fleet: fleet, Calls: *calls, Out: os.Stdout,
				Progress: os.Stderr, ProgressTTY: st != nil && st.Mode()&os.ModeCharDevice != 0}
		case "dev":
			cfg, err := opsFlags.Config()
			if err != nil {
				return Command{}, err
			}
			if c.Dev.Host == "" {
				return Command{}, errors.New("-host (TOOLFLEET_DEV_HOST) is empty: give an address such as 127.0.0.1 or 0.0.0.0")
			}
			fleet.NATSPort = c.Dev.Fleet.NATSPort
			fleet.Model, fleet.ToolsFile, fleet.OperatorRoles = c.Dev.Fleet.Model, c.Dev.Fleet.ToolsFile, c.Dev.Fleet.OperatorRoles
			if *pricesFile != "" {
				if fleet.Prices, err = planner.LoadPrices(*pricesFile); err != nil {
					return Command{}, fmt.Errorf("-prices (TOOLFLEET_PRICES_FILE): %w", err)
				}
			}
			if err := events.ValidateRoles(fleet.OperatorRoles); err != nil {
				return Command{}, fmt.Errorf("-operator-roles (TOOLFLEET_OPERATOR_ROLES): %w", err)
			}
			fleet.Admission = c.Dev.Fleet.Admission
			if err := errors.Join(env.Err(), fleet.Admission.Validate()); err != nil {
				return Command{}, err
			}
			if fleet.ToolsFile != "" {
				if _, err := os.Stat(fleet.ToolsFile); err != nil {
					return Command{}, fmt.Errorf("-tools-file (TOOLFLEET_TOOLS_FILE): %w", err)
				}
			}
			fleet.Log = cfg.Logger("toolfleet")
			c.Dev.Fleet = fleet
			c.Dev.OpsAddr = cfg.Addr
			c.Dev.Token = os.Getenv("TOOLFLEET_API_TOKEN")
			if f := os.Getenv("TOOLFLEET_API_TOKENS_FILE"); f != "" {
				if c.Dev.Tokens, err = plannerapi.LoadTokens(f); err != nil {
					return Command{}, err
				}
			}
			c.Dev.Out = os.Stdout
		}
		return c, nil
	}
}

// Run runs a parsed command until it is done (demo), its client leaves (mcp) or ctx
// ends (dev).
func Run(ctx context.Context, c Command) error {
	if c.Name == "mcp" { // no part of its own that traces: it calls the fleet's
		return MCP(ctx, c.MCP)
	}
	tracing, err := telemetry.Setup(ctx, "toolfleet")
	if err != nil {
		return err
	}
	if c.Name == "demo" {
		defer tracing.Stop(c.Demo.Fleet.Log) // after the fleet stopped: its last spans go out
		c.Demo.Fleet.Tracing = tracing
		return Demo(ctx, c.Demo)
	}
	defer tracing.Stop(c.Dev.Fleet.Log)
	c.Dev.Fleet.Tracing = tracing
	return Dev(ctx, c.Dev)
}
