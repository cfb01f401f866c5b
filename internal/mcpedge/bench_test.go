package mcpedge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// BenchmarkCall compares a tools/call through one edge replica (the official Go SDK's
// client over streamable HTTP, protocol 2026-07-28) with the same call published
// directly, on the same fleet in the same run: one call in flight (p50/p99 in µs) and 64
// concurrent clients (calls/s). Two direct baselines: pkg/client's Call, and "core", a
// call published with events.NewCall whose result is read from a core subscription,
// which is what the edge does inside (so edge − core is the cost of HTTP and MCP).
// "added" makes both calls in one loop, alternately, and reports edge − core of their
// p50s: the fairer figure on a shared machine.
//
// pkg/client's Call is measured at one call in flight only.
//
//	go test -run '^$' -bench 'Call/.*/1-in' -benchtime 2000x ./internal/mcpedge/
//	go test -run '^$' -bench 'Call/added' -benchtime 2000x ./internal/mcpedge/
//	go test -run '^$' -bench 'Call/.*/64' -benchtime 5000x ./internal/mcpedge/
func BenchmarkCall(b *testing.B) {
	f := startFleet(b)
	url, _ := f.edge(b, apiauth.Auth{}, 0)
	direct, err := client.New(f.js.NC)
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]int{"a": 40, "b": 2}
	rawArgs, _ := json.Marshal(args)
	viaClient := func(ctx context.Context) error {
		_, err := direct.Call(ctx, client.Request{Tool: "add", Arguments: rawArgs})
		return err
	}
	viaCore := func(ctx context.Context) error {
		id := nuid.Next()
		subj, _ := events.ResultSubject("", events.ReplyID(id), events.ReplyID(id))
		sub, err := f.js.NC.SubscribeSync(subj)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		msg, err := events.NewCall(events.CallOptions{Source: "/bench", ID: id}, events.Call{Tool: "add", Arguments: rawArgs})
		if err != nil {
			return err
		}
		if _, err := f.js.JS.PublishMsg(ctx, msg); err != nil {
			return err
		}
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		_, res, err := events.DecodeResult(events.CoreMsg(m))
		if err == nil && res.Status != events.StatusOK {
			b.Fatalf("core call: %+v", res)
		}
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	b.Cleanup(hc.CloseIdleConnections)
	session := func() *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	viaEdge := func(cs *mcp.ClientSession) func(context.Context) error {
		return func(ctx context.Context) error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: args})
			if err == nil && res.IsError {
				b.Fatalf("edge call: %+v", res)
			}
			return err
		}
	}

	one := session()
	modes := []string{"client", "core", "edge"}
	calls := map[string]func(context.Context) error{"client": viaClient, "core": viaCore, "edge": viaEdge(one)}
	for _, name := range modes {
		call := calls[name]
		b.Run(name+"/1-in-flight", func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := call(b.Context()); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}

	// Both in one loop, alternately, so that both see the same machine: on a shared one,
	// separate runs of core and edge see different loads.
	b.Run("added/1-in-flight", func(b *testing.B) {
		core, edge := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			for j := range 2 {
				lat, call := &core, viaCore
				if (i+j)%2 == 1 {
					lat, call = &edge, calls["edge"]
				}
				start := time.Now()
				if err := call(b.Context()); err != nil {
					b.Fatal(err)
				}
				*lat = append(*lat, time.Since(start))
			}
			i++
		}
		slices.Sort(core)
		slices.Sort(edge)
		c, e := core[len(core)/2], edge[len(edge)/2]
		b.ReportMetric(float64(c.Microseconds()), "core-p50-µs")
		b.ReportMetric(float64(e.Microseconds()), "edge-p50-µs")
		b.ReportMetric(float64((e - c).Microseconds()), "added-p50-µs")
		b.ReportMetric(0, "ns/op")
	})

	const clients = 64
	sessions := make([]func(context.Context) error, clients)
	for i := range sessions {
		sessions[i] = viaEdge(session())
	}
	for _, mode := range modes[1:] { // not client: 1,000 consumers would not last
		b.Run(mode+"/64-clients", func(b *testing.B) {
			var wg sync.WaitGroup
			work := make(chan struct{}, b.N)
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			b.ResetTimer()
			for i := range clients {
				call := calls[mode]
				if mode == "edge" {
					call = sessions[i]
				}
				wg.Go(func() {
					for range work {
						if err := call(b.Context()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
