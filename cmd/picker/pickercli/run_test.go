package pickercli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/pickerservice"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run starts the way a fleet does: the picker first, not ready while it waits for the
// catalog bucket; then an executor's jsutil.Ensure creates it and a tool is put, the
// picker indexes it, is ready and picks it. Run returns nil when its context ends. The
// re-indexing of each batch stays below the default info level.
func TestRun(t *testing.T) {
	opstest.Env(t, nil)
	srv := natstest.Start(t)
	addr := opstest.FreeAddr(t)
	c, err := Parse([]string{"-nats-url", srv.URL(), "-ops-addr", addr}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log opstest.Log
	c.Ops.LogTo = &log
	stop := opstest.Run(t, func(ctx context.Context) error { return Run(ctx, c) })

	nc := srv.Connect()
	natstest.EventuallyNil(t, 30*time.Second, "the picker to log that it waits for the catalog bucket", func() error {
		if len(log.Lines("waiting for the catalog bucket")) == 0 {
			return fmt.Errorf("its log:\n%s", log.String())
		}
		return nil
	})
	opstest.Serves(t, addr)
	if code, body := opstest.Get(t, addr, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "catalog not indexed") {
		t.Errorf("/readyz without a catalog: %d %q, want 503", code, body)
	}

	ctx := context.Background()
	js, _ := jetstream.New(nc)
	if err := jsutil.Ensure(ctx, js, events.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	cat, err := jsutil.OpenCatalog(ctx, js, events.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(ctx, tools.Definition{Type: "function", Name: "get_weather", Description: "Current weather for a city", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}); err != nil {
		t.Fatal(err)
	}
	opstest.WaitReady(t, addr)
	// Ready means the catalog as it was when the picker opened it is indexed; the put
	// may land just after that, so the pick is asked until the tool is in.
	var last []byte
	natstest.Eventually(t, 10*time.Second, "a pick of get_weather", func() bool {
		msg, err := nc.Request(pickerservice.PickSubject, []byte(`{"input":"weather"}`), 5*time.Second)
		if err != nil {
			return false
		}
		last = msg.Data
		var r pickerservice.Response
		return json.Unmarshal(msg.Data, &r) == nil && len(r.Results) > 0 && r.Results[0].Name == "get_weather"
	})
	if len(last) == 0 {
		t.Error("no pick answered")
	}
	opstest.Serves(t, addr, "toolfleet_picker_catalog_tools", "toolfleet_picker_requests_total")
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if got := log.Lines("catalog re-indexed"); len(got) > 0 {
		t.Errorf("re-indexing logged at the default level: %q", got)
	}
}
