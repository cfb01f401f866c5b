package runs_test

import (
	"context"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"io"
	"os"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/cmd/toolfleet/toolfleetcli"
	"github.com/toolfleet/toolfleet/pkg/client/runs"
)

// apiURL is the planner API of the all-in-one fleet the examples run against: `toolfleet
// dev` in process, with its scripted model (it follows the demo's script whatever the
// input: a few calls, then write_file, which waits for an approval, then the answer).
var apiURL string

func TestMain(m *testing.M) {
	os.Setenv("TOOLFLEET_MODEL", "")
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan toolfleetcli.DevAddrs, 1)
	stopped := make(chan error, 1)
	go func() {
		stopped <- toolfleetcli.Dev(ctx, toolfleetcli.DevOptions{HTTPAddr: "127.0.0.1:0",
			Fleet: toolfleetcli.Options{NATSPort: -1}, Out: io.Discard,
			Ready: func(a toolfleetcli.DevAddrs) { ready <- a }})
	}()
	select {
	case a := <-ready:
		apiURL = a.API
	case err := <-stopped:
		fmt.Fprintln(os.Stderr, "the fleet did not start:", err)
		os.Exit(1)
	}
	code := m.Run()
	cancel()
	<-stopped
	if err := goleak.Find(); code == 0 && err != nil { // the fleet stopped: nothing of it or the tests may be left
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = 1
	}
	os.Exit(code)
}

var demoTools = []string{"get_time", "list_dir", "calculator", "write_file", "read_file"}

// Start a run, follow its events, approve its unsafe call when it asks, and read the
// answer.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := runs.New(apiURL) // runs.WithToken(...) for a planner with tokens
	if err != nil {
		panic(err)
	}
	run, err := c.Start(ctx, runs.StartRequest{Input: "Total the orders and write a report.", Tools: demoTools})
	if err != nil {
		panic(err)
	}
	for ev, err := range c.Follow(ctx, run.ID, 0) {
		if err != nil {
			panic(err)
		}
		switch ev.What {
		case "tool_called":
			fmt.Println("called", ev.Data.Tool)
		case "approval_needed":
			fmt.Println("approving", ev.Data.Tool)
			if err := c.Approve(ctx, ev.Data.CallID, "the report may be written"); err != nil {
				panic(err)
			}
		}
	}
	run, err = c.Get(ctx, run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Termination+":", run.Answer)
	// Output:
	// called get_time
	// called list_dir
	// called calculator
	// called write_file
	// approving write_file
	// called read_file
	// completed: The orders total 84; I wrote it to report.txt and read it back to check.
}

// Deny a call and cancel a run; a second cancel is refused, with the run beside the
// error.
func ExampleClient_Cancel() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := runs.New(apiURL)
	if err != nil {
		panic(err)
	}
	run, err := c.Start(ctx, runs.StartRequest{Input: "Write a report.", Tools: demoTools})
	if err != nil {
		panic(err)
	}
	for ev, err := range c.Follow(ctx, run.ID, 0) {
		if err != nil {
			panic(err)
		}
		if ev.What == "approval_needed" {
			break // the run waits at write_file
		}
	}
	run, err = c.Cancel(ctx, run.ID, "not today")
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.Termination, run.Detail)
	_, err = c.Cancel(ctx, run.ID, "again")
	var apiErr *runs.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Run.Termination)
	}
	// Output:
	// done canceled canceled by anonymous: not today
	// 409 canceled
}

// Continue a run that ended with a follow-up, and wait for it again.
func ExampleClient_FollowUp() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := runs.New(apiURL)
	if err != nil {
		panic(err)
	}
	run, err := c.Start(ctx, runs.StartRequest{Input: "Write a report.", Tools: demoTools})
	if err != nil {
		panic(err)
	}
	for ev, err := range c.Follow(ctx, run.ID, 0) {
		if err != nil {
			panic(err)
		}
		if ev.What == "approval_needed" {
			if err := c.Deny(ctx, ev.Data.CallID, "no reports today"); err != nil {
				panic(err)
			}
		}
	}
	run, err = c.Get(ctx, run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Answer)
	if _, err := c.FollowUp(ctx, run.ID, runs.FollowUp{Input: "Thanks."}); err != nil {
		panic(err)
	}
	run, err = c.Wait(ctx, run.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.Turn)
	// Output:
	// The report was not approved, so I did not write it. The orders total 84.
	// done 1
}
