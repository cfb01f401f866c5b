package toolfleetcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolfleet/toolfleet/internal/ops"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// The toolfleet command line, on cobra: the all-in-one programs (demo, dev, mcp, health,
// with the settings, logs and exit codes of every program: internal/ops) and the client
// commands that drive a fleet (run, runs, approvals, tools, call, version, completion).
// POSIX flags (--tools a,b, -o json), nested commands, help on every one and shell
// completion, the conventions of kubectl and temporal, which use it too; and, as the
// other programs on Go's flag package and the docs spell them, a long flag with one dash
// (-model x): see longFlags.

// Exit codes of the client commands (those of the programs are internal/ops's).
const (
	exitOK      = ops.ExitOK
	exitFailure = ops.ExitFailure // the planner refused, a run did not complete, nothing answered
	exitUsage   = ops.ExitConfig  // a bad flag, argument, address or context file
)

// exitError carries a command's exit code through cobra; its message, if any, has been
// or is to be printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a bad command line: exit 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// Main runs the toolfleet command line (without the program name) and returns its exit
// code; stdout and stderr are where it writes (os.Stdout and os.Stderr in cmd/toolfleet).
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, args, stdout, stderr)
}

// MainContext is [Main] until ctx ends (a client command stops; a program stops
// cleanly).
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := execute(ctx, newRoot(stdout, stderr), args)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "toolfleet:", ee.err)
		}
		return ee.code
	}
	// cobra's own: an unknown command or flag, a wrong number of arguments.
	fmt.Fprintln(stderr, "toolfleet:", err)
	fmt.Fprintln(stderr, "Run 'toolfleet --help' for usage.")
	return exitUsage
}

// execute runs the command line on root, its long flags given with one dash read as
// with two.
func execute(ctx context.Context, root *cobra.Command, args []string) error {
	root.SetArgs(longFlags(root, args))
	return root.ExecuteContext(ctx)
}

// cli is what the commands share: where they write, the settings of the root's flags,
// and how an all-in-one program runs once its flags are parsed.
type cli struct {
	stdout, stderr io.Writer
	apiURL, token  string
	contextFile    string
	output         string
	// program serves the program (c.serve), or for Parse only configures it.
	program func(ctx context.Context, configure func() (Command, error)) error
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	c := &cli{stdout: stdout, stderr: stderr}
	c.program = c.serve
	return c.root()
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "toolfleet",
		Short: "Run LLM agents' tool calls as a fleet of workers on NATS JetStream",
		Long: `toolfleet runs the whole fleet in one process (demo, dev, mcp) and drives a fleet's
planner over its HTTP API (run, runs, approvals, tools) or calls a tool over NATS (call).

The planner's address and token: --api-url and --token, else TOOLFLEET_API_URL and
TOOLFLEET_API_TOKEN, else the context file (--context, TOOLFLEET_CONTEXT, default
~/.config/toolfleet/context.json: {"apiUrl": "...", "token": "...", "natsUrl": "..."}),
else ` + runs.DefaultURL + ` (where 'toolfleet dev' serves).

A long flag takes one dash or two: -model x, --model x and --model=x are one.

Exit codes: 0 success; 1 a failure (the planner refused, a run did not complete, nothing
answered); 2 a bad command line or configuration.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// cobra's default for a bare `toolfleet` is the help and exit 0; a command line
		// without a command is a usage error.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q", args[0])
			}
			cmd.SetOut(c.stderr)
			_ = cmd.Usage()
			return &exitError{code: exitUsage, err: errors.New("want a command")}
		},
	}
	root.Args = cobra.ArbitraryArgs
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&c.apiURL, "api-url", "", "the planner API's URL (env TOOLFLEET_API_URL; default "+runs.DefaultURL+")")
	pf.StringVar(&c.token, "token", "", "the planner API's bearer token (env TOOLFLEET_API_TOKEN)")
	pf.StringVar(&c.contextFile, "context", "", "the context file (env TOOLFLEET_CONTEXT; default ~/.config/toolfleet/context.json)")
	pf.StringVarP(&c.output, "output", "o", "table", "output format: table or json")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	root.AddGroup(&cobra.Group{ID: "fleet", Title: "Run a fleet in this process:"},
		&cobra.Group{ID: "client", Title: "Drive a fleet:"})
	for _, name := range []string{"demo", "dev", "mcp"} {
		root.AddCommand(c.programCommand(name))
	}
	root.AddCommand(c.healthCommand())
	for _, cmd := range []*cobra.Command{c.runCommand(), c.runsCommand(), c.approvalsCommand(), c.toolsCommand(), c.callCommand()} {
		cmd.GroupID = "client"
		root.AddCommand(cmd)
	}
	root.AddCommand(c.versionCommand())
	root.CompletionOptions.HiddenDefaultCmd = false
	return root
}

// programSummaries are the all-in-one programs' one-line help.
var programSummaries = map[string]string{
	"demo":   "An agent run and a load of tool calls through a fleet in this process, then a summary",
	"dev":    "The fleet, its planner API and ops server in this process, until Ctrl-C",
	"mcp":    "The MCP edge over stdio, on a fleet reached over NATS",
	"health": "Exit 0 when the ops server beside it is ready, else 1",
}

// programCommand is an all-in-one program: its flags (programFlags), each with its
// TOOLFLEET_* variable, and the exit codes of every program (internal/ops).
func (c *cli) programCommand(name string) *cobra.Command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	configure := programFlags(name, fs)
	cmd := c.fleetCommand(name, fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return c.program(cmd.Context(), configure)
	}
	return cmd
}

// serve runs a program as every program runs (ops.Serve): its errors logged on stderr,
// its exit code.
func (c *cli) serve(ctx context.Context, configure func() (Command, error)) error {
	if code := ops.Serve(ctx, "toolfleet", c.stderr, configure, Run); code != ops.ExitOK {
		return &exitError{code: code}
	}
	return nil
}

func (c *cli) healthCommand() *cobra.Command {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	f := ops.RegisterHealth(fs)
	cmd := c.fleetCommand("health", fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if code := f.Health(cmd.Context(), c.stderr); code != ops.ExitOK {
			return &exitError{code: code}
		}
		return nil
	}
	return cmd
}

// fleetCommand is the command of an all-in-one program or health, with the flags of fs.
// The root's flags are the client commands': its help leaves them out and it refuses
// them, which it would ignore (`dev --token T` would not protect dev's API:
// TOOLFLEET_API_TOKEN does).
func (c *cli) fleetCommand(name string, fs *flag.FlagSet) *cobra.Command {
	cmd := &cobra.Command{
		Use:     name + " [flags]",
		Short:   programSummaries[name],
		Long:    programSummaries[name] + ".\n\nA flag's variable (env TOOLFLEET_...) is its default; the flag, given, wins.",
		GroupID: "fleet",
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
				if f.Changed && err == nil {
					err = usageErrorf("%s takes no --%s: that flag is the client commands'", cmd.CommandPath(), f.Name)
				}
			})
			return err
		},
	}
	addGoFlags(cmd, fs)
	cmd.SetUsageFunc(func(cmd *cobra.Command) error {
		fmt.Fprintf(cmd.OutOrStderr(), "Usage:\n  %s\n\nFlags:\n%s", cmd.UseLine(), cmd.LocalFlags().FlagUsages())
		return nil
	})
	if fs.Lookup(ops.LevelFlag) != nil { // so no error to check
		levels := []string{"debug", "info", "warn", "error"}
		_ = cmd.RegisterFlagCompletionFunc(ops.LevelFlag, cobra.FixedCompletions(levels, cobra.ShellCompDirectiveNoFileComp))
	}
	return cmd
}

func (c *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build: module version, VCS revision and time, Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.checkOutput(); err != nil {
				return err
			}
			b := ops.Build("toolfleet")
			if c.output == "json" {
				return c.printJSON(b)
			}
			fmt.Fprintln(c.stdout, b)
			return nil
		},
	}
}

func (c *cli) checkOutput() error {
	if c.output != "table" && c.output != "json" {
		return usageErrorf("-o %q: want table or json", c.output)
	}
	return nil
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// contextFile is the small file that says which fleet the client commands drive.
type contextFile struct {
	APIURL  string `json:"apiUrl,omitempty"`
	Token   string `json:"token,omitempty"`
	NATSURL string `json:"natsUrl,omitempty"`
}

// settings resolves the fleet's addresses and token: flags, then the environment, then
// the context file, then the defaults.
func (c *cli) settings() (contextFile, error) {
	path, explicit := c.contextFile, c.contextFile != ""
	if !explicit {
		path, explicit = os.Getenv("TOOLFLEET_CONTEXT"), os.Getenv("TOOLFLEET_CONTEXT") != ""
	}
	if !explicit {
		if dir, err := os.UserConfigDir(); err == nil {
			path = filepath.Join(dir, "toolfleet", "context.json")
		}
	}
	var file contextFile
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &file); err != nil {
				return file, usageErrorf("the context file %s: %v", path, err)
			}
		case !errors.Is(err, os.ErrNotExist) || explicit:
			return file, usageErrorf("the context file: %v", err)
		}
	}
	pick := func(flag, env, fromFile, def string) string {
		for _, v := range []string{flag, os.Getenv(env), fromFile} {
			if v != "" {
				return v
			}
		}
		return def
	}
	s := contextFile{
		APIURL:  pick(c.apiURL, "TOOLFLEET_API_URL", file.APIURL, runs.DefaultURL),
		Token:   pick(c.token, "TOOLFLEET_API_TOKEN", file.Token, ""),
		NATSURL: pick("", "TOOLFLEET_NATS_URL", file.NATSURL, defaultNATSURL),
	}
	return s, nil
}

// defaultNATSURL is where the CLI looks for NATS unless told: toolfleet dev's.
const defaultNATSURL = "nats://127.0.0.1:4222"

// api returns the planner API's client for the settings, after checking -o.
func (c *cli) api() (*runs.Client, error) {
	if err := c.checkOutput(); err != nil {
		return nil, err
	}
	s, err := c.settings()
	if err != nil {
		return nil, err
	}
	api, err := runs.New(s.APIURL, runs.WithToken(s.Token))
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return api, nil
}

// failed turns an API client's error into the command's: the planner's refusal as it
// said it; no answer at all with where it was asked and how to point elsewhere.
func (c *cli) failed(api *runs.Client, err error) error {
	var apiErr *runs.Error
	var urlErr *url.Error
	var opErr *net.OpError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == 401:
		return &exitError{code: exitFailure, err: fmt.Errorf("%v (give a token: --token or TOOLFLEET_API_TOKEN)", err)}
	case errors.As(err, &apiErr):
		return &exitError{code: exitFailure, err: err}
	case errors.As(err, &opErr), errors.As(err, &urlErr):
		return &exitError{code: exitFailure, err: fmt.Errorf("no answer from the planner API at %s: %v (is 'toolfleet dev' running? set --api-url or TOOLFLEET_API_URL)", api.URL(), errors.Unwrap(err))}
	}
	return &exitError{code: exitFailure, err: err}
}
