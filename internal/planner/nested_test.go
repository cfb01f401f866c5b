package planner

import (
	"strings"
	"testing"
)

// A run_agent call starts a child run with a scoped tool set; the child's answer is the
// call's result. At the depth limit, the call is refused and the model is told why.
func TestNestedRunAndDepthLimit(t *testing.T) {
	b := setup(t, map[string]string{
		"main": `
steps:
  - calls: [{name: run_agent, arguments: {task: "add 2 and 3", tools: [add], model: child}}]
  - when: {tool: run_agent, contains: "five"}
    text: the child says five
  - text: no answer from the child
`,
		"child": `
steps:
  - calls: [{name: add, arguments: {a: 2, b: 3}}]
  - text: five
`,
		"deep": `
steps:
  - calls: [{name: run_agent, arguments: {task: "go deeper", model: deep}}]
  - when: {error: true, contains: "limited to a depth"}
    text: hit the limit
  - text: went deeper
`,
	})
	run := b.run(t, StartRequest{Input: "delegate", Tools: []string{"add", "run_agent"}})
	if run.Answer != "the child says five" {
		t.Fatalf("answer %q (%s %s)", run.Answer, run.Termination, run.Detail)
	}
	c := run.Calls[0]
	if c.Name != "run_agent" || c.Status != "ok" || !strings.Contains(string(c.Output), childID(c.ID)) {
		t.Fatalf("run_agent call = %+v", c)
	}
	child, err := b.p.Get(b.ctx, childID(c.ID))
	if err != nil {
		t.Fatal(err)
	}
	if child.ParentID != run.ID || child.Depth != 1 || len(child.Tools) != 1 || child.Tools[0] != "add" || child.Answer != "five" {
		t.Fatalf("child run = %+v", child)
	}

	// With a depth limit of 1, the top run (depth 0) may start a child (depth 1), but the
	// child's own run_agent call would reach depth 2: it is refused with the limit.
	deep := b.run(t, StartRequest{Input: "recurse", Model: "deep", Tools: []string{"run_agent"}, Limits: Limits{MaxDepth: 1}})
	if deep.Answer != "went deeper" {
		t.Fatalf("top run answer %q (%s)", deep.Answer, deep.Detail)
	}
	inner, err := b.p.Get(b.ctx, childID(deep.Calls[0].ID))
	if err != nil {
		t.Fatal(err)
	}
	if inner.Depth != 1 || inner.Answer != "hit the limit" {
		t.Fatalf("the child at the depth limit answered %q at depth %d", inner.Answer, inner.Depth)
	}
}
