package executorcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/mcptooltest"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The executor program serves an MCP server's tools, and a tool the server adds while it
// runs: a new executor takes over with it. One it removes is answered no_such_tool.
func TestRunServesToolsAnMCPServerAddsLater(t *testing.T) {
	opstest.Env(t, nil)
	bin := mcptooltest.BuildStdioServer(t)
	srv := natstest.Start(t)
	addr := opstest.FreeAddr(t)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	err := os.WriteFile(file, []byte(`
mcpServers:
  - name: test
    prefix: t
    command: {argv: [`+bin+`]}
    defaults: {safe: true}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"-nats-url", srv.URL(), "-ops-addr", addr, "-builtins", "none", "-tools-file", file,
		"-grace-period", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log opstest.Log
	c.Ops.LogTo = &log
	stop := opstest.Run(t, func(ctx context.Context) error { return Run(ctx, c) })
	opstest.WaitReady(t, addr)

	cl, err := client.New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	call := func(tool, args string) (events.Result, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return cl.Call(ctx, client.Request{Tool: tool, Arguments: json.RawMessage(args)})
	}
	if res, err := call("t_add", `{"a":1,"b":2}`); err != nil || string(res.Output) != `{"sum":3}` {
		t.Fatalf("t_add: %s %v", res.Output, err)
	}
	// Calls keep coming while the executors hand over: every one is answered once.
	var wg sync.WaitGroup
	failures := make(chan string, 100)
	for i := range 40 {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 50 * time.Millisecond)
			res, err := call("t_add", fmt.Sprintf(`{"a":%d,"b":1}`, i))
			if want := fmt.Sprintf(`{"sum":%d}`, i+1); err != nil || string(res.Output) != want {
				failures <- fmt.Sprintf("call %d: %s %v", i, res.Output, err)
			}
		})
	}
	if _, err := call("t_grow", `{"name":"late"}`); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 15*time.Second, "the hand-over to an executor serving t_late", func() bool {
		return len(log.Lines("executor handed over")) > 0
	})
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error("during the hand-over, " + f)
	}
	if res, err := call("t_late", `{"text":"hi"}`); err != nil || string(res.Output) != `"late: hi"` {
		t.Errorf("t_late, added by the server after the start: %s %v", res.Output, err)
	}
	if res, err := call("t_add", `{"a":2,"b":2}`); err != nil || string(res.Output) != `{"sum":4}` {
		t.Errorf("t_add after the hand-over: %s %v", res.Output, err)
	}
	opstest.WaitReady(t, addr)
	if _, err := call("t_shrink", `{"name":"echo"}`); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 15*time.Second, "a second hand-over", func() bool {
		return len(log.Lines("executor handed over")) > 1
	})
	// Out of the catalog at once; its calls are answered no_such_tool after the usual
	// 10 s (executor.WithNoSuchToolTimeout).
	if n := len(log.Lines("executor handed over", `"no_longer_served":["t_echo"]`)); n != 1 {
		t.Errorf("the second hand-over does not say t_echo is no longer served:\n%s", log.String())
	}
	if res, err := call("t_echo", `{"text":"gone"}`); !errors.Is(err, tools.ErrNoSuchTool) {
		t.Errorf("t_echo after the server removed it: %s %v, want no_such_tool", res.Status, err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
