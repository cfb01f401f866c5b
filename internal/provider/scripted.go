package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Scripted is an offline, deterministic Model that answers from a Script. It is for
// first runs, demos and tests; it is labelled as such: its Name is "scripted/<name>" and
// its responses say Provider "scripted".
//
// It keeps no state. The step for a turn is found by replaying the conversation: each
// assistant message already in the request consumed the first step (from where the
// previous one left off) whose When matched the tool results before it (a step that
// repeats stays where it is, for the next turn too). So the same
// request always gets the same answer, from any replica, after any restart.
//
// Tokens are counted as whitespace-separated words: input over the system text, the
// messages (texts, call names and arguments, results) and the tools' names and
// descriptions; output over the answer's text and calls. A step's Usage overrides both.
type Scripted struct {
	script Script
}

// NewScripted returns a model that answers from s.
func NewScripted(s Script) (*Scripted, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.Name == "" {
		s.Name = "script"
	}
	return &Scripted{script: s}, nil
}

// LoadScripted returns a model that answers from the script file at path.
func LoadScripted(path string) (*Scripted, error) {
	s, err := LoadScript(path)
	if err != nil {
		return nil, err
	}
	return NewScripted(s)
}

// Name returns "scripted/<script name>".
func (m *Scripted) Name() string { return "scripted/" + m.script.Name }

// Generate implements Model.
func (m *Scripted) Generate(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	turn, step, err := m.next(req.Messages)
	if err != nil {
		return nil, err
	}
	st := m.script.Steps[step]
	msg := Message{Role: RoleAssistant, Text: st.Text}
	var seed string
	if len(st.Calls) > 0 { // the hash names calls only: an answer in text needs none
		seed = conversationHash(req)
	}
	for i, c := range st.Calls {
		args, _ := scriptArguments(c.Arguments) // checked when the script was loaded
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{
			ID: fmt.Sprintf("script_%d_%d_%s", turn, i, seed), Name: c.Name, Arguments: args})
	}
	resp := &Response{Message: msg, StopReason: StopEnd, RawStopReason: fmt.Sprintf("step %d", step+1),
		Provider: "scripted", Model: m.script.Name}
	if st.Usage != nil {
		resp.Usage = Usage{InputTokens: st.Usage.Input, OutputTokens: st.Usage.Output}
	} else {
		resp.Usage = Usage{InputTokens: requestWords(req), OutputTokens: messageWords(msg)}
	}
	return finish(resp), nil
}

// Stream implements Model: the text word by word, then each call.
func (m *Scripted) Stream(ctx context.Context, req Request, onDelta func(Delta)) (*Response, error) {
	resp, err := m.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	streamDeltas(resp, onDelta)
	return resp, nil
}

// streamDeltas hands an offline model's answer to onDelta as a stream would: its text
// word by word, then each call.
func streamDeltas(resp *Response, onDelta func(Delta)) {
	text := resp.Message.Text
	for text != "" {
		i := strings.IndexAny(text[1:], " \n")
		chunk := text
		if i >= 0 {
			chunk = text[:i+1]
		}
		onDelta(Delta{Text: chunk})
		text = text[len(chunk):]
	}
	for i := range resp.Message.ToolCalls {
		tc := resp.Message.ToolCalls[i]
		onDelta(Delta{ToolCall: &tc})
	}
}

// next replays the conversation and returns the turn number and the step that answers it.
func (m *Scripted) next(msgs []Message) (turn, step int, err error) {
	cursor := 0
	var results []ToolResult
	for _, msg := range msgs {
		switch msg.Role {
		case RoleTool:
			results = append(results, msg.ToolResults...)
		case RoleAssistant:
			i := m.match(cursor, results)
			if i < 0 {
				return 0, 0, fmt.Errorf("scripted/%s: turn %d of the conversation matches no step from step %d on",
					m.script.Name, turn+1, cursor+1)
			}
			cursor, results = i+1, nil
			if m.script.Steps[i].Repeat {
				cursor = i
			}
			turn++
		}
	}
	i := m.match(cursor, results)
	if i < 0 {
		if cursor >= len(m.script.Steps) {
			return 0, 0, fmt.Errorf("scripted/%s: the script's %d steps are used up at turn %d",
				m.script.Name, len(m.script.Steps), turn+1)
		}
		return 0, 0, fmt.Errorf("scripted/%s: no step from step %d on matches the results before turn %d",
			m.script.Name, cursor+1, turn+1)
	}
	return turn, i, nil
}

// match returns the first step from cursor whose condition holds, or -1.
func (m *Scripted) match(cursor int, results []ToolResult) int {
	for i := cursor; i < len(m.script.Steps); i++ {
		if m.script.Steps[i].When.matches(results) {
			return i
		}
	}
	return -1
}

// conversationHash makes call ids differ between conversations while staying the same
// for the same request.
func conversationHash(req Request) string {
	b, err := json.Marshal(struct {
		S string
		M []Message
	}{req.System, req.Messages})
	if err != nil {
		// Arguments a model sent malformed are kept verbatim and do not marshal: the
		// conversation's bytes as they are still tell it from another.
		b = fmt.Appendf(nil, "%q %+v", req.System, req.Messages)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:4])
}

func requestWords(req Request) int {
	n := words(req.System)
	for _, d := range req.Tools {
		n += words(d.Name) + words(d.Description)
	}
	for _, msg := range req.Messages {
		n += messageWords(msg)
		for _, r := range msg.ToolResults {
			n += words(string(r.Content))
		}
	}
	return n
}

func messageWords(msg Message) int {
	n := words(msg.Text)
	for _, c := range msg.ToolCalls {
		n += words(c.Name) + words(string(c.Arguments))
	}
	return n
}

func words(s string) int { return len(strings.Fields(s)) }

var _ Model = (*Scripted)(nil)
