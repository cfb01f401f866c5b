package toolsfile

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
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

// A command tool's run context is on an inherited descriptor whose path is in
// TOOLFLEET_RUN_CONTEXT, /dev/fd/3: the tool can open it (twice, even), sandboxed or
// not, and no file of it is ever in the temporary directory.
func TestCommandRunContextOnAnInheritedDescriptor(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rc := &tools.RunContext{RunID: "r-1", Messages: json.RawMessage(`[{"role":"user","text":"private"}]`)}
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "c-1", RunID: "r-1", Attempt: 1, Run: rc})
	want, err := json.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	policies := []*sandbox.Policy{nil}
	if abi, _ := sandbox.ABI(); abi >= 4 {
		policies = append(policies, &sandbox.Policy{Read: []string{tmp}}) // read-only, the temporary directory listed
	}
	for _, pol := range policies {
		c := &Command{Argv: []string{"/bin/sh", "-c", `echo "$TOOLFLEET_RUN_CONTEXT"; cat "$TOOLFLEET_RUN_CONTEXT"; echo; cat "$TOOLFLEET_RUN_CONTEXT"; ls -A "$TMPDIR"`},
			Env: map[string]string{"TMPDIR": tmp}, policy: pol}
		out, err := c.run(ctx, "reader", nil, json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("sandboxed %v: %v", pol != nil, err)
		}
		var text string
		if err := json.Unmarshal(out.(json.RawMessage), &text); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		if w := "/dev/fd/3\n" + string(want) + "\n" + string(want); text != w {
			t.Errorf("sandboxed %v: the tool printed %q, want %q (and nothing in $TMPDIR)", pol != nil, text, w)
		}
	}
}
