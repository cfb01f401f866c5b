package toolsfile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Run context for command and HTTP tools. A tool whose entry asks for it
// ("runContext": true) gets, with each call a planner run makes, the run context
// (tools.RunContext: runId, step, metadata, messages, omitted):
//
//   - a command tool in a file, whose path is in TOOLFLEET_RUN_CONTEXT (removed when the
//     command ends; its arguments stay alone on stdin);
//   - an HTTP tool in its request body, which is then {"arguments": …, "runContext": …}
//     instead of the arguments alone (a GET or HEAD tool, whose arguments go in the query,
//     cannot take it, and gets none).
//
// A tool that did not ask gets nothing: the executor gives the context only to tools
// whose definition asks for it (tools.CallInfo.Run is nil otherwise), and neither
// variable nor envelope exists then.

// RunContextEnv names the variable that holds the path of a command tool's run context.
const RunContextEnv = "TOOLFLEET_RUN_CONTEXT"

// runContextOf returns the run context ctx carries for the tool, nil when none.
func runContextOf(ctx context.Context) *tools.RunContext {
	if info, ok := tools.CallInfoFrom(ctx); ok {
		return info.Run
	}
	return nil
}

// writeRunContext writes the run context in ctx, if any, to a file of its own (readable
// by its owner only: the conversation may be private) and returns its path and the
// function that removes it; an empty path when there is none.
func writeRunContext(ctx context.Context, tool string) (path string, remove func(), err error) {
	rc := runContextOf(ctx)
	if rc == nil {
		return "", func() {}, nil
	}
	data, err := json.Marshal(rc)
	if err != nil {
		return "", nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("tool %s: encode the run context: %v", tool, err))
	}
	f, err := os.CreateTemp("", "toolfleet-run-context-*.json") // mode 0600
	if err != nil {
		return "", nil, tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: write the run context: %v", tool, err))
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	remove = func() { _ = os.Remove(f.Name()) }
	if werr != nil {
		remove()
		return "", nil, tools.Wrap(tools.CodeToolFailed, werr, fmt.Sprintf("tool %s: write the run context: %v", tool, werr))
	}
	return f.Name(), remove, nil
}

// withRunContext is the body of an HTTP tool's request: the arguments alone, or, when ctx
// carries a run context, {"arguments": args, "runContext": …}.
func withRunContext(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	rc := runContextOf(ctx)
	if rc == nil {
		return args, nil
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return json.Marshal(struct {
		Arguments  json.RawMessage   `json:"arguments"`
		RunContext *tools.RunContext `json:"runContext"`
	}{args, rc})
}
