package mcpedge_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A long call made with a progress token gets the tool's progress as progress
// notifications (the official Go SDK's client receives them); when the client gives up,
// the edge cancels the call on the fleet: the tool sees its context canceled and the
// fleet's result says canceled. Over HTTP the client closes the request's stream; over
// stdio it sends notifications/cancelled.
func TestLongCallReportsProgressAndIsCanceledWithItsClient(t *testing.T) {
	f := startFleet(t)
	url, e := f.edge(t, testAuth, 0)
	t.Run("http", func(t *testing.T) {
		notes := make(chan *mcp.ProgressNotificationParams, 256)
		cs := connectWith(t, url, userToken, "", progressTo(notes))
		longCallThenCancel(t, f, cs, notes)
	})
	t.Run("stdio", func(t *testing.T) {
		st, ct := mcp.NewInMemoryTransports()
		served := make(chan error, 1)
		go func() { served <- e.ServeStdio(t.Context(), events.Identity{Tenant: "acme", Role: "user"}, st) }()
		notes := make(chan *mcp.ProgressNotificationParams, 256)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, progressTo(notes)).Connect(t.Context(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		longCallThenCancel(t, f, cs, notes)
		_ = cs.Close()
		<-served
	})
}

func progressTo(notes chan<- *mcp.ProgressNotificationParams) *mcp.ClientOptions {
	return &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		select {
		case notes <- r.Params:
		default:
		}
	}}
}

// longCallThenCancel calls slow as acme/user on cs, takes four progress notifications,
// gives up, and checks that the fleet canceled the call.
func longCallThenCancel(t *testing.T, f *fleet, cs *mcp.ClientSession, notes <-chan *mcp.ProgressNotificationParams) {
	waitForTools(t, cs, anonymousTools)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
		p.SetProgressToken("long-1")
		_, err := cs.CallTool(ctx, p)
		answered <- err
	}()
	var seen []*mcp.ProgressNotificationParams
	for len(seen) < 4 {
		select {
		case p := <-notes:
			seen = append(seen, p)
		case err := <-answered:
			t.Fatalf("the call ended before it was canceled: %v", err)
		case <-time.After(waitTimeout):
			t.Fatalf("%d progress notifications, want 4", len(seen))
		}
	}
	cancel()
	if err := <-answered; !errors.Is(err, context.Canceled) {
		t.Fatalf("the canceled call returned %v", err)
	}

	callID, _ := seen[0].Meta["io.toolfleet/callId"].(string)
	if callID == "" || seen[0].Message != "started" {
		t.Fatalf("first notification %+v: want the start, with the call id", seen[0])
	}
	for i, p := range seen {
		if p.ProgressToken != "long-1" || p.Progress != float64(i+1) || p.Meta["io.toolfleet/callId"] != callID {
			t.Errorf("notification %d: token %v progress %v meta %v", i, p.ProgressToken, p.Progress, p.Meta)
		}
		if i > 0 && (!strings.HasPrefix(p.Message, "step ") || p.Meta["io.toolfleet/fraction"] == nil) {
			t.Errorf("notification %d: message %q meta %v, want the tool's report", i, p.Message, p.Meta)
		}
	}

	// The tool saw its context canceled, and the fleet answered the call canceled.
	awaitSlow(t, f.slowCanceled, callID, "it saw its context canceled")
	c, err := client.New(f.js.NC, client.WithIdentity(events.Identity{Tenant: "acme", Role: "user"}))
	if err != nil {
		t.Fatal(err)
	}
	var res events.Result
	natstest.Eventually(t, waitTimeout, "the canceled call's result", func() bool {
		r, found, err := c.StoredResult(t.Context(), "", callID)
		res = r
		return err == nil && found
	})
	if res.Status != events.StatusCanceled || res.Error == nil || res.Error.Code != tools.CodeCanceled {
		t.Fatalf("result %+v %+v, want canceled", res, res.Error)
	}
}
