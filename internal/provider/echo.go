package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// EchoModelName is the spec of the built-in [Echo] model, which no script file shadows.
const EchoModelName = "scripted/echo"

// Echo is an offline, deterministic Model that calls the tools a message names: for
// trying a fleet's tools by hand without a language model or a script. A user message
// that names offered tools (by their names, as words) gets one turn calling each of them
// in the order named, with the JSON object that follows a name as its arguments:
//
//	calculator {"expression": "6*7"} and get_time
//
// calls calculator with {"expression":"6*7"} and get_time with {}. Once the calls have
// their results it answers with each result's text, and a message that names no offered
// tool is echoed back with the names it could have used. So every follow-up gets an
// answer. Like [Scripted], it keeps no state, is labelled "scripted" in its responses,
// and counts tokens as words.
type Echo struct{}

// NewEcho returns the echo model.
func NewEcho() *Echo { return &Echo{} }

// Name returns "scripted/echo".
func (*Echo) Name() string { return EchoModelName }

// Generate implements Model.
func (*Echo) Generate(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted/echo: %w", err)
	}
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	last := req.Messages[len(req.Messages)-1]
	var msg Message
	switch last.Role {
	case RoleTool:
		msg = Message{Role: RoleAssistant, Text: echoResults(last.ToolResults)}
	default:
		msg = echoCalls(req, last.Text)
	}
	resp := &Response{Message: msg, StopReason: StopEnd, RawStopReason: "echo",
		Provider: "scripted", Model: "echo",
		Usage: Usage{InputTokens: requestWords(req), OutputTokens: messageWords(msg)}}
	return finish(resp), nil
}

// Stream implements Model: the text word by word, then each call.
func (e *Echo) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	resp, err := e.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	streamDeltas(resp, onDelta)
	return resp, nil
}

// echoCalls answers a user's text: a call of each offered tool it names, or the text.
func echoCalls(req Request, text string) Message {
	type named struct {
		at   int
		name string
	}
	var found []named
	offered := make([]string, 0, len(req.Tools))
	for _, d := range req.Tools {
		offered = append(offered, d.Name)
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_.-])` + regexp.QuoteMeta(d.Name) + `($|[^A-Za-z0-9_.-])`)
		for _, loc := range re.FindAllStringSubmatchIndex(text, -1) {
			found = append(found, named{at: loc[3], name: d.Name}) // end of the leading group
		}
	}
	if len(found) == 0 {
		sort.Strings(offered)
		hint := "no tools are offered"
		if len(offered) > 0 {
			hint = "name one of " + strings.Join(offered, ", ") + ` to call it, with its JSON arguments after it: calculator {"expression": "6*7"}`
		}
		return Message{Role: RoleAssistant, Text: "echo: " + text + "\n(" + hint + ")"}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].at < found[j].at })
	seed := conversationHash(req)
	msg := Message{Role: RoleAssistant}
	for i, f := range found {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: fmt.Sprintf("echo_%d_%s", i, seed), Name: f.name,
			Arguments: argumentsAfter(text[f.at+len(f.name):])})
	}
	return msg
}

// argumentsAfter returns the JSON object rest starts with (after spaces), or {}.
func argumentsAfter(rest string) json.RawMessage {
	rest = strings.TrimLeft(rest, " \t\n:")
	if !strings.HasPrefix(rest, "{") {
		return json.RawMessage(`{}`)
	}
	var obj json.RawMessage
	if err := json.NewDecoder(strings.NewReader(rest)).Decode(&obj); err != nil {
		return json.RawMessage(`{}`)
	}
	var compact bytes.Buffer
	if json.Compact(&compact, obj) != nil {
		return json.RawMessage(`{}`)
	}
	return compact.Bytes()
}

// echoResults is the answer once the calls have their results: each one's text.
func echoResults(results []ToolResult) string {
	var b strings.Builder
	for i, r := range results {
		if i > 0 {
			b.WriteString("\n")
		}
		status := "result"
		if r.IsError {
			status = "error"
		}
		fmt.Fprintf(&b, "%s %s: %s", r.Name, status, resultText(r.Content))
	}
	return b.String()
}

var _ Model = (*Echo)(nil)
