package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

var addSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"additionalProperties":false}`)

// fleet starts what the examples need: an embedded JetStream server with the fleet's
// streams, and an executor serving add (safe) and delete_report (unsafe: each call
// waits for an approval). stop shuts it all down.
func fleet() (nc *nats.Conn, stop func()) {
	dir, err := os.MkdirTemp("", "toolfleet-example-")
	if err != nil {
		panic(err)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	nc, err = nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	js, _ := jetstream.New(nc)
	if err := jsutil.Ensure(context.Background(), js, events.Config{}); err != nil {
		panic(err)
	}
	reg := tools.NewRegistry()
	err = reg.AddFunc(tools.Definition{Name: "add", Description: "Adds two numbers.", Parameters: addSchema, Safe: true},
		func(_ context.Context, args json.RawMessage) (any, error) {
			var in struct{ A, B float64 }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			return map[string]float64{"sum": in.A + in.B}, nil
		})
	if err != nil {
		panic(err)
	}
	err = reg.AddFunc(tools.Definition{Name: "delete_report", Description: "Deletes a report.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		func(_ context.Context, args json.RawMessage) (any, error) { return "deleted", nil })
	if err != nil {
		panic(err)
	}
	ex, err := executor.New(nc, reg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ex.Run(ctx) }()
	return nc, func() {
		cancel()
		<-done
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
}

func ExampleClient_Call() {
	nc, stop := fleet()
	defer stop()

	c, err := client.New(nc)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Call(ctx, client.Request{Tool: "add", Arguments: json.RawMessage(`{"a":2,"b":40}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, string(res.Output))
	// Output: ok {"sum":42}
}

// A call the fleet refuses returns its result and a *tools.Error with the code.
func ExampleClient_Call_error() {
	nc, stop := fleet()
	defer stop()

	c, _ := client.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Call(ctx, client.Request{Tool: "add", Arguments: json.RawMessage(`{"a":"two"}`)})
	fmt.Println(res.Status, errors.Is(err, tools.ErrInvalidInput))

	// A call made again with the same id gets the stored answer; the tool runs once.
	first, _ := c.Call(ctx, client.Request{Tool: "add", ID: "call-7", Arguments: json.RawMessage(`{"a":1,"b":1}`)})
	again, _ := c.Call(ctx, client.Request{Tool: "add", ID: "call-7", Arguments: json.RawMessage(`{"a":1,"b":1}`)})
	fmt.Println(string(again.Output), again.Executor == first.Executor && again.FinishedAt.Equal(first.FinishedAt))
	// Output:
	// invalid true
	// {"sum":2} true
}

// An approver watches the requests of unsafe tools and answers them; the call waits.
func ExampleClient_Answer() {
	nc, stop := fleet()
	defer stop()

	c, _ := client.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	approvals, err := c.WatchApprovals(ctx)
	if err != nil {
		panic(err)
	}
	defer approvals.Stop()

	result := make(chan events.Result, 1)
	go func() {
		res, _ := c.Call(ctx, client.Request{Tool: "delete_report", ID: "del-1", Arguments: json.RawMessage(`{"name":"q3"}`)})
		result <- res
	}()
	_, req, err := approvals.Next()
	if err != nil {
		panic(err)
	}
	fmt.Println("approval requested:", req.Tool, req.CallID, string(req.Arguments))
	if err := c.Answer(ctx, req.Tool, req.CallID, events.ApprovalAnswer{Decision: events.DecisionApprove, By: "ops"}); err != nil {
		panic(err)
	}
	res := <-result
	fmt.Println(res.Status, string(res.Output))
	// Output:
	// approval requested: delete_report del-1 {"name":"q3"}
	// ok "deleted"
}

// FollowRun reads a run's lifecycle from its first event to "done". A planner publishes
// them; here they are published as a planner does, with events.NewRunEvent.
func ExampleClient_FollowRun() {
	nc, stop := fleet()
	defer stop()

	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ev := range []struct {
		what string
		r    events.RunEvent
	}{
		{"step", events.RunEvent{RunID: "run-1", Step: 1}},
		{"tool_called", events.RunEvent{RunID: "run-1", Step: 1, CallID: "c1", Tool: "add"}},
		{"done", events.RunEvent{RunID: "run-1", Step: 2}},
	} {
		m, _ := events.NewRunEvent("/toolfleet/planner", ev.what, ev.r, time.Time{})
		if _, err := js.PublishMsg(ctx, m); err != nil {
			panic(err)
		}
	}

	c, _ := client.New(nc)
	run, err := c.FollowRun(ctx, "run-1")
	if err != nil {
		panic(err)
	}
	defer run.Stop()
	for {
		e, r, err := run.Next()
		if err != nil {
			panic(err)
		}
		line := fmt.Sprint(e.Type, " step ", r.Step)
		if r.CallID != "" {
			line += " call " + r.CallID
		}
		fmt.Println(line)
		if e.Type == events.RunType("done") {
			break
		}
	}
	// Output:
	// io.toolfleet.run.step step 1
	// io.toolfleet.run.tool_called step 1 call c1
	// io.toolfleet.run.done step 2
}
