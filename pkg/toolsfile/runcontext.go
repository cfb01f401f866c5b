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
//   - a command tool on an inherited file descriptor (3), whose path, /dev/fd/3, is in
//     TOOLFLEET_RUN_CONTEXT: a memfd no other process can list, and that no directory
//     ever holds (its arguments stay alone on stdin);
//   - an HTTP tool in its request body, which is then {"arguments": …, "runContext": …}
//     instead of the arguments alone (a GET or HEAD tool, whose arguments go in the query,
//     cannot take it, and gets none).
//
// A tool that did not ask gets nothing: the executor gives the context only to tools
// whose definition asks for it (tools.CallInfo.Run is nil otherwise), and neither
// variable nor envelope exists then.

// RunContextEnv names the variable that holds the path of a command tool's run context.
const RunContextEnv = "TOOLFLEET_RUN_CONTEXT"

// runContextPath is where a command reads its run context: the descriptor the
// executor passes it (the first of cmd.ExtraFiles), as a path to open.
const runContextPath = "/dev/fd/3"

// runContextOf returns the run context ctx carries for the tool, nil when none.
func runContextOf(ctx context.Context) *tools.RunContext {
	if info, ok := tools.CallInfoFrom(ctx); ok {
		return info.Run
	}
	return nil
}

// runContextFile returns the run context in ctx, if any, in a file of its own for the
// command to inherit (see sealedFile: in no directory, so no other tool can find it,
// and nothing is left after a crash), and the function that closes it; a nil file when
// there is none.
func runContextFile(ctx context.Context, tool string) (*os.File, func(), error) {
	rc := runContextOf(ctx)
	if rc == nil {
		return nil, func() {}, nil
	}
	data, err := json.Marshal(rc)
	if err != nil {
		return nil, nil, tools.Wrap(tools.CodeInternal, err, fmt.Sprintf("tool %s: encode the run context: %v", tool, err))
	}
	f, done, err := sealedFile("toolfleet-run-context", data)
	if err != nil {
		return nil, nil, tools.Wrap(tools.CodeToolFailed, err, fmt.Sprintf("tool %s: pass the run context: %v", tool, err))
	}
	return f, done, nil
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
