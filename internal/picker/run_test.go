package picker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/natstest"
)

// TestRun runs the whole binary's entry point against embedded JetStream: it creates
// the catalog bucket when absent, serves picks, and returns nil when its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{NATSURL: srv.URL(), HTTPAddr: "127.0.0.1:0", Log: zerolog.Nop()})
	}()
	nc := srv.Connect()
	js, _ := jetstream.New(nc)
	var kv jetstream.KeyValue
	waitFor(t, "catalog bucket", func() bool {
		var err error
		kv, err = js.KeyValue(context.Background(), CatalogBucket)
		return err == nil
	})
	putTool(t, kv, tool("get_weather", "Current weather for a city"))
	waitFor(t, "a pick that finds the tool", func() bool {
		msg, err := nc.Request(PickSubject, []byte(`{"input":"weather"}`), time.Second)
		if err != nil {
			return false
		}
		var r Response
		return json.Unmarshal(msg.Data, &r) == nil && len(r.Results) == 1 && r.Results[0].Name == "get_weather"
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
