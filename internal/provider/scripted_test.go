package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// conversation drives a scripted model the way the planner does: it appends each answer
// and the results the given function produces for its calls.
type conversation struct {
	t     *testing.T
	model provider.Model
	msgs  []provider.Message
}

func (c *conversation) turn(results func(provider.ToolCall) provider.ToolResult) *provider.Response {
	c.t.Helper()
	resp, err := c.model.Generate(context.Background(), provider.Request{Messages: c.msgs})
	if err != nil {
		c.t.Fatalf("turn %d: %v", len(c.msgs), err)
	}
	c.msgs = append(c.msgs, resp.Message)
	if len(resp.Message.ToolCalls) > 0 {
		tool := provider.Message{Role: provider.RoleTool}
		for _, tc := range resp.Message.ToolCalls {
			tool.ToolResults = append(tool.ToolResults, results(tc))
		}
		c.msgs = append(c.msgs, tool)
	}
	return resp
}

func ok(tc provider.ToolCall) provider.ToolResult {
	return provider.ToolResult{CallID: tc.ID, Name: tc.Name, Content: json.RawMessage(`{"ok":true}`)}
}

// validating answers like the fleet: convert_temperature with a non-number is invalid.
func validating(denyEmail bool) func(provider.ToolCall) provider.ToolResult {
	return func(tc provider.ToolCall) provider.ToolResult {
		var args map[string]any
		_ = json.Unmarshal(tc.Arguments, &args)
		switch {
		case tc.Name == "convert_temperature":
			if _, isNum := args["celsius"].(float64); !isNum {
				return provider.ToolResult{CallID: tc.ID, Name: tc.Name, IsError: true,
					Content: json.RawMessage(`{"error":{"code":"invalid_tool_input","message":"/celsius: got string, want number"}}`)}
			}
		case tc.Name == "send_email" && denyEmail:
			return provider.ToolResult{CallID: tc.ID, Name: tc.Name, IsError: true,
				Content: json.RawMessage(`{"error":{"code":"denied","message":"approval denied by alice"}}`)}
		}
		return ok(tc)
	}
}

func loadDemo(t *testing.T) *provider.Scripted {
	t.Helper()
	m, err := provider.LoadScripted(filepath.Join("testdata", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func callNames(resp *provider.Response) []string {
	var names []string
	for _, c := range resp.Message.ToolCalls {
		names = append(names, c.Name)
	}
	return names
}

func TestScriptedDemoApproved(t *testing.T) {
	t.Parallel()
	m := loadDemo(t)
	if m.Name() != "scripted/demo" {
		t.Errorf("name = %q", m.Name())
	}
	c := &conversation{t: t, model: m, msgs: []provider.Message{{Role: provider.RoleUser, Text: "Weather in Paris? Email ops."}}}

	r := c.turn(validating(false))
	if !reflect.DeepEqual(callNames(r), []string{"get_weather", "get_time"}) || r.Message.Text == "" {
		t.Fatalf("turn 1 = %q %v, want text and two parallel calls", r.Message.Text, callNames(r))
	}
	if r.Provider != "scripted" || r.StopReason != provider.StopToolCalls {
		t.Errorf("provider %q stop %q", r.Provider, r.StopReason)
	}
	if r.Message.ToolCalls[0].ID == r.Message.ToolCalls[1].ID {
		t.Errorf("parallel calls share an id")
	}
	r = c.turn(validating(false))
	if string(r.Message.ToolCalls[0].Arguments) != `{"celsius":"eighteen","to":"fahrenheit"}` {
		t.Fatalf("turn 2 arguments = %s", r.Message.ToolCalls[0].Arguments)
	}
	r = c.turn(validating(false))
	if string(r.Message.ToolCalls[0].Arguments) != `{"celsius":18,"to":"fahrenheit"}` {
		t.Fatalf("turn 3 should repair the call after its error, got %s %s", callNames(r), r.Message.ToolCalls[0].Arguments)
	}
	r = c.turn(validating(false))
	if !reflect.DeepEqual(callNames(r), []string{"send_email"}) {
		t.Fatalf("turn 4 = %v, want send_email", callNames(r))
	}
	r = c.turn(validating(false))
	if r.Message.Text != "It is 18°C (64.4°F) and sunny in Paris; I emailed ops." || len(r.Message.ToolCalls) != 0 {
		t.Fatalf("turn 5 = %q, want the final answer (the denied branch skipped)", r.Message.Text)
	}
	if r.StopReason != provider.StopEnd || r.Usage != (provider.Usage{InputTokens: 400, OutputTokens: 20}) {
		t.Errorf("final stop %q usage %+v, want end and the scripted usage", r.StopReason, r.Usage)
	}
	// The script is used up: a further turn is a clear error.
	_, err := m.Generate(context.Background(), provider.Request{Messages: append(c.msgs,
		provider.Message{Role: provider.RoleUser, Text: "And tomorrow?"})})
	if err == nil || !strings.Contains(err.Error(), "used up") {
		t.Errorf("err = %v, want the script used up", err)
	}
}

func TestScriptedDemoDeniedAndNoRepairNeeded(t *testing.T) {
	t.Parallel()
	m := loadDemo(t)
	c := &conversation{t: t, model: m, msgs: []provider.Message{{Role: provider.RoleUser, Text: "Weather?"}}}
	c.turn(ok)
	c.turn(ok) // the "invalid" call succeeds here: the repair step must be skipped
	r := c.turn(validating(true))
	if !reflect.DeepEqual(callNames(r), []string{"send_email"}) {
		t.Fatalf("turn 3 = %v, want send_email (no repair after a success)", callNames(r))
	}
	// turn 3's send_email is answered with a denial by validating(true).
	r = c.turn(ok)
	if !strings.HasPrefix(r.Message.Text, "The email was not approved") || len(r.Message.ToolCalls) != 0 {
		t.Fatalf("after a denial: %q, want the denied branch's final answer", r.Message.Text)
	}
}

// TestScriptedDeterministic: the same request gets the same answer from two instances
// (two planner replicas), ids included; a different conversation gets different ids.
func TestScriptedDeterministic(t *testing.T) {
	t.Parallel()
	req := provider.Request{System: "be brief", Messages: []provider.Message{{Role: provider.RoleUser, Text: "Weather in Paris?"}}}
	a, err := loadDemo(t).Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := loadDemo(t).Generate(context.Background(), req)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two replicas answered differently:\n%+v\n%+v", a, b)
	}
	req.Messages[0].Text = "Weather in Lyon?"
	c, _ := loadDemo(t).Generate(context.Background(), req)
	if c.Message.ToolCalls[0].ID == a.Message.ToolCalls[0].ID {
		t.Errorf("two conversations got the same call id %q", a.Message.ToolCalls[0].ID)
	}
	// Usage is a word count: "be brief" + "Weather in Paris?" = 5 words in.
	if a.Usage.InputTokens != 5 || a.Usage.OutputTokens == 0 {
		t.Errorf("usage = %+v, want 5 input words and some output", a.Usage)
	}
}

func TestScriptedStream(t *testing.T) {
	t.Parallel()
	s, err := provider.ParseScript([]byte(`{"name":"s","steps":[{"text":"It is sunny in Paris."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := provider.NewScripted(s)
	var chunks []string
	resp, err := m.Stream(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}}},
		func(d provider.Delta) { chunks = append(chunks, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 5 || strings.Join(chunks, "") != "It is sunny in Paris." || resp.Message.Text != "It is sunny in Paris." {
		t.Errorf("chunks = %q", chunks)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Generate(ctx, provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: err = %v", err)
	}
}

// TestScriptedStringArguments: a string is sent as it stands, so a script can send the
// malformed JSON a model sometimes writes.
func TestScriptedStringArguments(t *testing.T) {
	t.Parallel()
	s, err := provider.ParseScript([]byte("steps:\n  - calls: [{name: f, arguments: '{\"a\": '}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := provider.NewScripted(s)
	resp, err := m.Generate(context.Background(), provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Message.ToolCalls[0].Arguments); got != `"{\"a\": "` {
		t.Errorf("arguments = %s, want the string as a JSON string", got)
	}
}

// A repeating step answers every follow-up, after whichever branch the conversation took;
// the steps whose condition the follow-up's (absent) results fail are skipped.
func TestScriptedRepeatAnswersFollowUps(t *testing.T) {
	t.Parallel()
	s, err := provider.ParseScript([]byte(`
steps:
  - calls: [{name: send_email}]
  - when: {error: true, tool: send_email}
    text: The email was not sent.
  - when: {error: false, tool: send_email}
    text: I sent the email.
  - text: I am a script; I cannot answer that.
    repeat: true
`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := provider.NewScripted(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, denied := range []bool{false, true} {
		c := &conversation{t: t, model: m, msgs: []provider.Message{{Role: provider.RoleUser, Text: "Email ops."}}}
		c.turn(validating(denied)) // send_email, denied or done
		r := c.turn(ok)
		if want := map[bool]string{false: "I sent the email.", true: "The email was not sent."}[denied]; r.Message.Text != want {
			t.Fatalf("denied %v: answer %q, want %q", denied, r.Message.Text, want)
		}
		for _, followUp := range []string{"Why?", "And then?"} {
			c.msgs = append(c.msgs, provider.Message{Role: provider.RoleUser, Text: followUp})
			r = c.turn(ok)
			if r.Message.Text != "I am a script; I cannot answer that." || len(r.Message.ToolCalls) != 0 {
				t.Fatalf("denied %v: follow-up %q answered %q %v", denied, followUp, r.Message.Text, callNames(r))
			}
		}
	}
}

func TestScriptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, script, want string }{
		{"empty", ``, "the script is empty"},
		{"no steps", `name: x`, "no steps"},
		{"unknown field", "steps:\n  - txt: hi\n", "field txt not found"},
		{"empty step", "steps:\n  - when: {error: true}\n", "step 1 has neither text nor calls"},
		{"empty when", "steps:\n  - text: hi\n    when: {}\n", "step 1 has an empty when"},
		{"bad name", "steps:\n  - calls: [{name: 'get weather'}]\n", `tool name "get weather"`},
		{"list arguments", "steps:\n  - calls: [{name: f, arguments: [1, 2]}]\n", "step 1, call 1 (f): arguments must be an object or a string"},
		{"not yaml", "steps: [", "scripted:"},
		{"repeating calls", "steps:\n  - calls: [{name: f}]\n    repeat: true\n", "step 1 repeats and makes calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := provider.ParseScript([]byte(tt.script))
			if !errors.Is(err, provider.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tt.want)
			}
		})
	}
	if _, err := provider.LoadScripted(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, provider.ErrConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

// Call ids differ between conversations even where a conversation holds arguments that
// are not JSON (kept verbatim as the model sent them).
func TestScriptedCallIDsOfConversationsWithMalformedArguments(t *testing.T) {
	t.Parallel()
	m, err := provider.NewScripted(provider.Script{Name: "ids", Steps: []provider.Step{
		{Calls: []provider.ScriptCall{{Name: "lookup", Arguments: map[string]any{"q": "a"}}}},
		{Calls: []provider.ScriptCall{{Name: "lookup", Arguments: map[string]any{"q": "b"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	secondID := func(args string) string {
		t.Helper()
		resp, err := m.Generate(context.Background(), provider.Request{Messages: []provider.Message{
			{Role: provider.RoleUser, Text: "look it up"},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(args)}}},
			{Role: provider.RoleTool, ToolResults: []provider.ToolResult{{CallID: "c1", Name: "lookup", Content: json.RawMessage(`{}`)}}},
		}})
		if err != nil || len(resp.Message.ToolCalls) != 1 {
			t.Fatalf("generate: %v %+v", err, resp)
		}
		return resp.Message.ToolCalls[0].ID
	}
	if a, b := secondID(`{"q":`), secondID(`{"city":`); a == b {
		t.Errorf("two conversations share the call id %s", a)
	}
}
