package executor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Greet is the tool greet; its fields are its arguments.
type Greet struct {
	Name string `json:"name"`
}

func (Greet) Definition() tools.Definition {
	return tools.Definition{Name: "greet", Description: "Greets someone by name.", Safe: true}
}

// Run gets a fresh value per call, after the arguments passed the schema derived from
// the fields.
func (g *Greet) Run(context.Context) (any, error) {
	return map[string]string{"greeting": "Hello, " + g.Name + "!"}, nil
}

// An executor serving a typed tool on an embedded JetStream server; a caller publishes a
// call and reads its result.
func ExampleExecutor_Run() {
	srv, stopServer := startExampleServer()
	defer stopServer()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()

	reg := tools.NewRegistry()
	tools.MustAdd[Greet](reg)
	ex, err := executor.New(nc, reg)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	defer func() { cancel(); <-done }() // Run returns once the executor has stopped

	// The caller: listen on the result's subject, then publish the call. Run creates the
	// streams, so the publish is tried until they exist.
	subj, _ := events.ResultSubject("", "run-1", "call-1")
	results, err := nc.SubscribeSync(subj)
	if err != nil {
		panic(err)
	}
	call, err := events.NewCall(events.CallOptions{Source: "/example", ID: "call-1", RunID: "run-1"}, events.Call{Tool: "greet", Arguments: []byte(`{"name":"Ada"}`)})
	if err != nil {
		panic(err)
	}
	publishWhenReady(nc, call)
	msg, err := results.NextMsg(10 * time.Second)
	if err != nil {
		panic(err)
	}
	_, res, err := events.DecodeResult(events.CoreMsg(msg))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, string(res.Output))
	// Output: ok {"greeting":"Hello, Ada!"}
}

// New checks its arguments and options without touching the server.
func ExampleNew() {
	_, err := executor.New(nil, tools.NewRegistry())
	fmt.Println(errors.Is(err, executor.ErrInvalidOption))
	_, err = executor.New(&nats.Conn{}, tools.NewRegistry())
	fmt.Println(err)
	// Output:
	// true
	// executor: invalid option: the registry has no tools to serve
}

// publishWhenReady publishes m to JetStream once a stream takes it.
func publishWhenReady(nc *nats.Conn, m *nats.Msg) {
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			panic(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startExampleServer runs an embedded nats-server with JetStream on a free port, storing
// in a temporary directory; stop shuts it down and removes the directory.
func startExampleServer() (srv *server.Server, stop func()) {
	dir, err := os.MkdirTemp("", "toolfleet-example-")
	if err != nil {
		panic(err)
	}
	srv, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready after 10s")
	}
	return srv, func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
}
