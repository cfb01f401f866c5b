package jsutil_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestCatalogPutWatchExpire(t *testing.T) {
	t.Parallel()
	f := natstest.StartJetStream(t, events.Config{CatalogTTL: tools.Duration(3 * time.Second)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cat, err := jsutil.OpenCatalog(ctx, f.JS, f.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	echo := tools.Definition{Type: "function", Name: "echo", Description: "Echo.", Parameters: json.RawMessage(`{"type":"object"}`), Safe: true}
	if err := cat.Put(ctx, echo); err != nil {
		t.Fatal(err)
	}
	changes, err := cat.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := func() jsutil.CatalogChange {
		t.Helper()
		select {
		case c, ok := <-changes:
			if !ok {
				t.Fatal("watch closed")
			}
			return c
		case <-ctx.Done():
			t.Fatal("no catalog change before the deadline")
		}
		return jsutil.CatalogChange{}
	}
	if c := next(); c.Name != "echo" || c.Removed || string(c.Definition.Parameters) != `{"type":"object"}` {
		t.Errorf("initial %+v", c)
	}
	if c := next(); !c.Loaded || c.Name != "" {
		t.Errorf("want the end of the initial values, got %+v", c)
	}
	// Keep refreshes "sleep" (same definition: no change reported) while "echo" is left
	// to expire.
	sleep := tools.Definition{Type: "function", Name: "sleep", Description: "Sleep.", Safe: true, AllowNoSchema: true, NoSchemaMode: tools.NoSchemaReadOnly}
	keepCtx, stopKeep := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() {
		kept <- cat.Keep(keepCtx, []tools.Definition{sleep}, func(err error) { t.Errorf("keep: %v", err) })
	}()
	if c := next(); c.Name != "sleep" || c.Removed {
		t.Errorf("added %+v", c)
	}
	if c := next(); c.Name != "echo" || !c.Removed {
		t.Errorf("want echo expired, got %+v", c)
	}
	if _, ok, _ := cat.Get(ctx, "echo"); ok {
		t.Error("expired entry still readable")
	}
	defs, err := cat.List(ctx)
	if err != nil || len(defs) != 1 || defs[0].Name != "sleep" {
		t.Errorf("List = %v, %v; want [sleep] (kept alive past the TTL)", defs, err)
	}
	stopKeep()
	if err := <-kept; err != nil { // Keep has returned: nothing refreshes sleep any more
		t.Fatalf("keep: %v", err)
	}
	if c := next(); c.Name != "sleep" || !c.Removed {
		t.Errorf("want sleep expired once no longer kept, got %+v", c)
	}
	if err := cat.Put(ctx, tools.Definition{Name: "bad.name"}); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("bad name: %v", err)
	}
	// An entry that is not a valid definition for its key withdraws the tool, and says
	// why: one rule for every watcher.
	kv, err := f.JS.KeyValue(ctx, events.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(ctx, echo); err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Name != "echo" || c.Removed {
		t.Errorf("echo back: %+v", c)
	}
	for _, bad := range []string{`{"name":"other"}`, `not json`} {
		if _, err := kv.Put(ctx, "echo", []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if c := next(); c.Name != "echo" || !c.Removed || c.Err == nil {
			t.Errorf("bad entry %s: %+v, want echo withdrawn with an error", bad, c)
		}
		if _, _, err := cat.Get(ctx, "echo"); err == nil {
			t.Errorf("Get of bad entry %s: no error", bad)
		}
	}
	// A first put that fails returns at once, keeping nothing.
	if err := cat.Keep(ctx, []tools.Definition{{Name: "bad.name"}}, nil); !errors.Is(err, tools.ErrInvalidEvent) {
		t.Errorf("Keep of a bad name = %v, want invalid_event at once", err)
	}
}
