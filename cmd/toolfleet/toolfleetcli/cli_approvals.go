package toolfleetcli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

func (c *cli) approvalsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the calls that wait for an approval, and answer them",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(c.approvalsList(),
		c.answerCommand("approve", "Approve a call as the model made it", "approve", false),
		c.answerCommand("deny", "Deny a call: it does not run, and the model is told why", "deny", false),
		c.answerCommand("modify", "Approve a call with other arguments (checked against the tool's schema)", "approve", true))
	return cmd
}

func (c *cli) approvalsList() *cobra.Command {
	var f runs.ApprovalFilter
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List approvals: pending (oldest first) by default",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			page, err := api.ListApprovals(cmd.Context(), f)
			if err != nil {
				return c.failed(api, err)
			}
			if c.output == "json" {
				return c.printJSON(page)
			}
			t := newTable(c.stdout, "CALL", "RUN", "TOOL", "STATUS", "AGE", "BY", "ANSWERED", "ARGUMENTS")
			for _, a := range page.Approvals {
				args := string(a.Arguments)
				if a.ArgumentsRef != nil {
					args = "(by reference)"
				}
				by, answered := "-", "-"
				if a.AnsweredAt != nil {
					answered = age(*a.AnsweredAt) + " ago"
					by = orDash(a.By)
					if a.ClaimedBy != "" {
						by += " (" + a.ClaimedBy + ")"
					}
				}
				t.row(a.CallID, a.RunID, a.Tool, a.Status, age(a.RequestedAt), by, answered, short(args, 60))
			}
			t.flush()
			if page.Next != "" {
				fmt.Fprintf(c.stderr, "more: toolfleet approvals ls --cursor %s\n", page.Next)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.Status, "status", "", "pending (default), answered or all")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "approvals on the page, 1 to 500 (default 50)")
	cmd.Flags().StringVar(&f.Cursor, "cursor", "", "the page after the one that printed this cursor")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions([]string{"pending", "answered", "all"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// answerCommand is approve, deny or modify: one answer to a call's approval (the first
// answer wins; a later one exits 1 with the decision that stood).
func (c *cli) answerCommand(name, short, decision string, withArgs bool) *cobra.Command {
	var a runs.Answer
	use, nargs := name+" CALL", 1
	if withArgs {
		use, nargs = name+` CALL '{"json":"arguments"}'`, 2
	}
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              cobra.ExactArgs(nargs),
		ValidArgsFunction: c.completePendingCalls,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.Decision = decision
			if withArgs {
				if !json.Valid([]byte(args[1])) {
					return usageErrorf("the arguments are not JSON: %s", args[1])
				}
				a.Arguments = json.RawMessage(args[1])
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			if err := api.Answer(cmd.Context(), args[0], a); err != nil {
				return c.failed(api, err)
			}
			if c.output == "json" {
				return c.printJSON(map[string]any{"callId": args[0], "decision": a.Decision})
			}
			past := map[string]string{"approve": "approved", "deny": "denied", "modify": "approved with new arguments"}[name]
			fmt.Fprintf(c.stdout, "call %s %s\n", args[0], past)
			return nil
		},
	}
	cmd.Flags().StringVar(&a.Reason, "reason", "", "why, for the record (a denial's reason is shown to the model)")
	cmd.Flags().StringVar(&a.By, "by", "", "a note of who answers, kept as the approval's claimed_by (its by is the token's identity)")
	return cmd
}
