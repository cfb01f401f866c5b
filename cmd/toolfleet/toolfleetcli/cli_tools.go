package toolfleetcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func (c *cli) toolsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools you may call, and how the fleet serves them",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	list := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the tools: executors serving each, calls waiting and in flight, recent errors",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ts, err := c.tools(cmd.Context())
			if err != nil {
				return err
			}
			if c.output == "json" {
				return c.printJSON(map[string]any{"tools": ts})
			}
			t := newTable(c.stdout, "NAME", "SAFE", "EXECUTORS", "WAITING", "IN FLIGHT", "CALLS", "ERRORS", "DESCRIPTION")
			for _, tool := range ts {
				t.row(tool.Name, yesNoLower(tool.Safe), tool.Executors, tool.Waiting, tool.InFlight, tool.Recent.Calls, tool.Recent.Errors, short(tool.Description, 50))
			}
			t.flush()
			return nil
		},
	}
	show := &cobra.Command{
		Use:               "show TOOL",
		Short:             "Show a tool: its description, parameters' schema and the fleet's state of it",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeTools,
		RunE: func(cmd *cobra.Command, args []string) error {
			ts, err := c.tools(cmd.Context())
			if err != nil {
				return err
			}
			for _, tool := range ts {
				if tool.Name != args[0] {
					continue
				}
				if c.output == "json" {
					return c.printJSON(tool)
				}
				w := c.stdout
				fmt.Fprintf(w, "%s: %s\n", tool.Name, tool.Description)
				fmt.Fprintf(w, "  safe: %s (an unsafe tool's calls wait for an approval)\n", yesNoLower(tool.Safe))
				fmt.Fprintf(w, "  executors: %d %s\n", tool.Executors, strings.Join(tool.ExecutorIDs, ", "))
				fmt.Fprintf(w, "  calls: %d waiting, %d in flight; %d calls, %d errors in the last %s\n",
					tool.Waiting, tool.InFlight, tool.Recent.Calls, tool.Recent.Errors, tool.Recent.Window)
				if len(tool.Roles) > 0 || len(tool.Tenants) > 0 {
					fmt.Fprintf(w, "  roles: %s; tenants: %s\n", orAny(tool.Roles), orAny(tool.Tenants))
				}
				if tool.NoSchemaMode != "" {
					fmt.Fprintf(w, "  no schema: %s\n", tool.NoSchemaMode)
				}
				var params bytes.Buffer
				if json.Indent(&params, tool.Parameters, "  ", "  ") == nil {
					fmt.Fprintf(w, "  parameters:\n  %s\n", params.String())
				}
				return nil
			}
			return &exitError{code: exitFailure, err: fmt.Errorf("no tool %q among the tools you may call (toolfleet tools ls)", args[0])}
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}

func (c *cli) tools(ctx context.Context) ([]runs.Tool, error) {
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	ts, err := api.Tools(ctx)
	if err != nil {
		return nil, c.failed(api, err)
	}
	return ts, nil
}

func yesNoLower(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orAny(s []string) string {
	if len(s) == 0 {
		return "any"
	}
	return strings.Join(s, ", ")
}

func (c *cli) callCommand() *cobra.Command {
	var natsURL, tenant, role string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   `call TOOL '{"json":"arguments"}'`,
		Short: "Call a tool on the fleet directly over NATS, and print its result",
		Long: `Call a tool the way any program does with pkg/client: the call event is published on
NATS and its result read from the results stream. The planner is not involved, so no
model and no run; an unsafe tool's call waits for an approval. NATS: --nats-url, else
TOOLFLEET_NATS_URL, else the context file's natsUrl, else nats://127.0.0.1:4222;
credentials from TOOLFLEET_NATS_CREDS or TOOLFLEET_NATS_USER/_PASSWORD.

--tenant and --role (both, or neither: anonymous) make the call as that caller: it is
published on toolfleet.call.TOOL.TENANT.ROLE, whose last two tokens executors take as
the caller, so the NATS user must be allowed that subject (a tenant's user is, for its
own tenant and role), and its answer is read under the inbox prefix _INBOX_TENANT, the
one a tenant's user may subscribe to. A tool that excludes the caller answers forbidden.

Prints the tool's output (-o json: the whole result: status, output, duration, attempts,
executor). Exit 1 when the tool answers with an error (its code and message on stderr)
or no answer comes within --timeout.`,
		Example: `  toolfleet call calculator '{"expression":"6*7"}'
  toolfleet call report '{"month":"2026-05"}' --tenant acme --role admin`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: c.completeTools,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := c.checkOutput(); err != nil {
				return err
			}
			arguments := json.RawMessage(`{}`)
			if len(args) == 2 {
				if !json.Valid([]byte(args[1])) {
					return usageErrorf("the arguments are not JSON: %s", args[1])
				}
				arguments = json.RawMessage(args[1])
			}
			caller := events.Identity{Tenant: tenant, Role: role}
			if (tenant == "") != (role == "") {
				return usageErrorf("--tenant and --role go together: give both, or neither for an anonymous call")
			}
			if err := caller.Validate(); err != nil {
				return usageErrorf("%v", err)
			}
			s, err := c.settings()
			if err != nil {
				return err
			}
			if natsURL != "" {
				s.NATSURL = natsURL
			}
			conf := natsconn.Config{URL: s.NATSURL, Name: "toolfleet-cli", CredsFile: os.Getenv("TOOLFLEET_NATS_CREDS"),
				User: os.Getenv("TOOLFLEET_NATS_USER"), Password: os.Getenv("TOOLFLEET_NATS_PASSWORD")}
			if err := conf.Validate(); err != nil {
				return usageErrorf("%v", err)
			}
			opts := append(conf.Options(zerolog.Nop()), nats.Timeout(5*time.Second))
			var clientOpts []client.Option
			if !caller.IsZero() {
				opts = append(opts, nats.CustomInboxPrefix("_INBOX_"+tenant))
				clientOpts = append(clientOpts, client.WithIdentity(caller))
			}
			nc, err := nats.Connect(conf.URL, opts...)
			if err != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf("no NATS at %s: %v (is 'toolfleet dev' running? set --nats-url or TOOLFLEET_NATS_URL)", conf.URL, err)}
			}
			defer nc.Close()
			fleet, err := client.NewContext(cmd.Context(), nc, clientOpts...)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := fleet.Call(ctx, client.Request{Tool: args[0], Arguments: arguments})
			if c.output == "json" && res.Status != "" {
				if perr := c.printJSON(res); perr != nil {
					return perr
				}
			}
			var te *tools.Error
			switch {
			case errors.As(err, &te):
				return &exitError{code: exitFailure, err: fmt.Errorf("%s: %s: %s", args[0], te.Code, te.Message)}
			case errors.Is(err, context.DeadlineExceeded):
				return &exitError{code: exitFailure, err: fmt.Errorf("%s: no result within %s (--timeout)", args[0], timeout)}
			case err != nil:
				return &exitError{code: exitFailure, err: err}
			}
			if c.output != "json" {
				var out bytes.Buffer
				if json.Indent(&out, res.Output, "", "  ") != nil {
					out.Write(res.Output)
				}
				fmt.Fprintln(c.stdout, out.String())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats-url", "", "NATS server URL (env TOOLFLEET_NATS_URL; default nats://127.0.0.1:4222)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the result (the call's deadline travels with it)")
	cmd.Flags().StringVar(&tenant, "tenant", "", "call as this tenant (with --role; the NATS user must be allowed its subject)")
	cmd.Flags().StringVar(&role, "role", "", "call as this role of --tenant")
	return cmd
}

// Completions ask the planner; without an answer they offer nothing.

func (c *cli) completeTools(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if cmd.Name() != "run" && cmd.Name() != "ls" && len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ts, err := c.tools(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, t := range ts {
		names = append(names, t.Name+"\t"+short(t.Description, 40))
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func (c *cli) completeRuns(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	api, err := c.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	page, err := api.ListRuns(cmd.Context(), runs.RunFilter{Limit: 50})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.ID+"\t"+r.Status+" "+short(r.Input, 30))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

func (c *cli) completePendingCalls(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	api, err := c.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	page, err := api.ListApprovals(cmd.Context(), runs.ApprovalFilter{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	for _, a := range page.Approvals {
		ids = append(ids, a.CallID+"\t"+a.Tool+" "+short(string(a.Arguments), 30))
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}
