package plannertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// LongScript calls the tool long, then answers.
const LongScript = `
steps:
  - calls: [{name: long, arguments: {}}]
  - text: the model was asked again
`

// LongTool is a tool that runs until its context ends, saying when it started and when
// it saw its context end (the call's id, on Started and Stopped).
type LongTool struct {
	Started, Stopped chan string
}

// NewLongTool returns a long tool named name and the definition and function to serve
// it with (idempotent as said).
func NewLongTool(name string, idempotent bool) (*LongTool, tools.Definition, tools.Func) {
	lt := &LongTool{Started: make(chan string, 8), Stopped: make(chan string, 8)}
	def := tools.Definition{Type: "function", Name: name, Description: "Runs until stopped.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object"}`), Timeout: tools.Duration(time.Minute), Idempotent: &idempotent}
	fn := func(ctx context.Context, _ json.RawMessage) (any, error) {
		info, _ := tools.CallInfoFrom(ctx)
		lt.Started <- info.CallID
		<-ctx.Done()
		lt.Stopped <- info.CallID
		return nil, ctx.Err()
	}
	return lt, def, fn
}

// Recv receives from ch within [WaitTimeout], failing the test with what it waited for.
func Recv(t testing.TB, ch chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(WaitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}
