package toolsfile_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// BenchmarkCacheCallback calls one command tool through an executor, without a cache
// (the baseline: the process runs each call), with the cache on keys never seen (a miss:
// a bucket read, the process, a bucket write) and on one key (a hit: a bucket read, no
// process). Compare the three ns/op of one run.
func BenchmarkCacheCallback(b *testing.B) {
	tool := func(name, cb string) string {
		return `
  - name: ` + name + `
    safe: true
    parameters: {type: object, properties: {q: {type: integer}}}
    command: {argv: [sh, -c, 'cat >/dev/null; echo "{\"answer\":42}"']}` + cb
	}
	body := "tools:" + tool("plain", "") + tool("cached", `
    callbacks: {beforeCall: {cache: {key: [/q], ttl: 10m}}}`)
	c := fileFleet(b, body)
	call := func(b *testing.B, tool string, q int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		args, _ := json.Marshal(map[string]int{"q": q})
		if _, err := c.Call(ctx, client.Request{Tool: tool, Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
	next := 0
	b.Run("no-cache", func(b *testing.B) {
		for b.Loop() {
			call(b, "plain", 0)
		}
	})
	b.Run("miss", func(b *testing.B) {
		for b.Loop() {
			next++
			call(b, "cached", next)
		}
	})
	call(b, "cached", -1)
	b.Run("hit", func(b *testing.B) {
		for b.Loop() {
			call(b, "cached", -1)
		}
	})
}

// BenchmarkComposite compares one composite call of three sub-calls with the same three
// calls made one after the other by the caller (the baseline): the composite adds its
// own call and a catalog look-up per sub-call, and saves the caller two round trips.
func BenchmarkComposite(b *testing.B) {
	body := `
tools:
  - name: hello
    safe: true
    allowNoSchema: true
    noSchemaMode: full
    command: {argv: [echo, hello]}
  - name: three
    composite: {tools: [hello]}
`
	c := fileFleet(b, body)
	call := func(b *testing.B, tool, args string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.Call(ctx, client.Request{Tool: tool, Arguments: json.RawMessage(args)}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("three-calls", func(b *testing.B) {
		for b.Loop() {
			for range 3 {
				call(b, "hello", `{}`)
			}
		}
	})
	b.Run("composite", func(b *testing.B) {
		for b.Loop() {
			call(b, "three", `{"calls":[{"name":"hello","args":{}},{"name":"hello","args":{}},{"name":"hello","args":{}}]}`)
		}
	})
}

// fileFleet serves the tools file body from an executor on an embedded JetStream and
// returns a client of it.
func fileFleet(b *testing.B, body string) *client.Client {
	b.Helper()
	fx := natstest.StartJetStream(b, events.Config{})
	runExecutor(b, fx, startFile(b, writeFile(b, "tools.yaml", body)), "file")
	c, err := client.New(fx.NC)
	if err != nil {
		b.Fatal(err)
	}
	return c
}
