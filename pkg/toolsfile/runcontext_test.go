package toolsfile

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// An HTTP tool given a run context (its definition asked, so the executor put it in
// CallInfo.Run) gets it in the body beside its arguments; without one the body is the
// arguments alone.
func TestHTTPRunnerSendsTheRunContext(t *testing.T) {
	srv, s := endpoint(t)
	spec := httpSpec(&HTTP{URL: srv.URL + "/ok"})
	rc := &tools.RunContext{RunID: "r-1", Step: 2, Metadata: map[string]string{"who": "alice"},
		Messages: json.RawMessage(`[{"role":"user","text":"hi"}]`)}
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "c-1", RunID: "r-1", Attempt: 1, Run: rc})
	if _, err := spec.Run(ctx, json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	body := s.body
	s.mu.Unlock()
	var got struct {
		Arguments  map[string]int   `json:"arguments"`
		RunContext tools.RunContext `json:"runContext"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Arguments["a"] != 1 || got.RunContext.RunID != "r-1" ||
		got.RunContext.Step != 2 || got.RunContext.Metadata["who"] != "alice" || string(got.RunContext.Messages) != string(rc.Messages) {
		t.Fatalf("the endpoint got %s (%v)", body, err)
	}

	ctx = tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "c-2", RunID: "r-1", Attempt: 1})
	if _, err := spec.Run(ctx, json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.body != `{"a":1}` {
		t.Fatalf("without a run context the endpoint got %s, want the arguments alone", s.body)
	}
}

// A command tool's run context file is its owner's only, and is gone once the command
// ended.
func TestCommandRunContextFileIsPrivateAndRemoved(t *testing.T) {
	spec := Spec{Definition: tools.Definition{Name: "reader"},
		Command: &Command{Argv: []string{"/bin/sh", "-c", `stat -c '"%a %n"' "$TOOLFLEET_RUN_CONTEXT"`}}}
	rc := &tools.RunContext{RunID: "r-1", Messages: json.RawMessage(`[]`)}
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "c-1", RunID: "r-1", Attempt: 1, Run: rc})
	out, err := spec.Run(ctx, json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var line string
	if err := json.Unmarshal(out.(json.RawMessage), &line); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	mode, path, ok := strings.Cut(line, " ")
	if !ok || mode != "600" {
		t.Fatalf("the run context file is %q, want mode 600", line)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the run context file %s is still there after the call (%v)", path, err)
	}
}
