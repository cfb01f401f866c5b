package picker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/natsconn"
	"github.com/toolfleet/toolfleet/internal/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// TestRun runs the binary's entry point against embedded JetStream the way a fleet
// starts: the picker first, waiting for the catalog bucket; then an executor's
// events.Ensure creates it and the executor's catalog puts a tool, which the picker
// then picks. Run returns nil when its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{NATS: natsconn.Config{URL: srv.URL()}, HTTPAddr: "127.0.0.1:0", Log: zerolog.Nop()})
	}()
	nc := srv.Connect()
	msg, err := nc.Request(PickSubject, []byte(`{"input":"weather"}`), 200*time.Millisecond)
	if err == nil {
		t.Fatalf("a picker without a catalog bucket answered %s", msg.Data)
	}

	js, _ := jetstream.New(nc)
	if err := events.Ensure(ctx, js, events.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	cat, err := events.OpenCatalog(ctx, js, events.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(ctx, tool("get_weather", "Current weather for a city")); err != nil {
		t.Fatal(err)
	}
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

func TestFlags(t *testing.T) {
	t.Setenv("TOOLFLEET_NATS_URL", "nats://example:4222")
	t.Setenv("TOOLFLEET_NATS_USER", "picker")
	t.Setenv("TOOLFLEET_NATS_PASSWORD", "secret")
	t.Setenv("TOOLFLEET_PICKER_HTTP", ":9191")
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "3")
	t.Setenv("TOOLFLEET_EMBEDDINGS_API_KEY", "sk-x")
	cfg, err := Flags([]string{"-timeout", "150ms", "-embeddings-url", "http://ollama:11434"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.URL != "nats://example:4222" || cfg.NATS.User != "picker" || cfg.NATS.Password != "secret" ||
		cfg.HTTPAddr != ":9191" || cfg.StreamReplicas != 3 || cfg.Timeout != 150*time.Millisecond ||
		cfg.EmbeddingsURL != "http://ollama:11434" || cfg.EmbeddingsAPIKey != "sk-x" || cfg.EmbeddingsModel != "text-embedding-3-small" {
		t.Errorf("config %+v", cfg)
	}
	for _, bad := range [][]string{{"-stream-replicas", "0"}, {"-timeout", "-1s"}, {"-nats-tls-cert", "only-cert.pem"}, {"-no-such-flag"}} {
		if _, err := Flags(bad); err == nil {
			t.Errorf("flags %v accepted", bad)
		}
	}
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "three")
	if _, err := Flags(nil); err == nil {
		t.Error("TOOLFLEET_STREAM_REPLICAS=three accepted")
	}
}
