package runrec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// MessageReplacement replaces the message at Index.
type MessageReplacement struct {
	Index   int              `json:"index"`
	Message provider.Message `json:"message"`
}

// Compaction replaces the messages From..To-1 with one message of Role (default user)
// whose text is Summary.
type Compaction struct {
	From    int           `json:"from"`
	To      int           `json:"to"`
	Summary string        `json:"summary"`
	Role    provider.Role `json:"role,omitempty"`
}

// ConversationEdit is what a resume's message record holds besides the messages it
// adds: an edit of the conversation as the model sees it from then on (the planner's
// pause.go), which the run's own record of the conversation does not apply.
type ConversationEdit struct {
	Replace []MessageReplacement `json:"replace,omitempty"`
	Drop    []int                `json:"drop,omitempty"`
	Compact *Compaction          `json:"compact,omitempty"`
	// Before is the length of the conversation the edit applies to (a check).
	Before int `json:"before"`
}

// Empty reports whether e changes nothing.
func (e *ConversationEdit) Empty() bool {
	return e == nil || len(e.Replace) == 0 && len(e.Drop) == 0 && e.Compact == nil
}

// Apply returns the conversation msgs edited by e, or why e cannot apply to it.
func (e *ConversationEdit) Apply(msgs []provider.Message) ([]provider.Message, error) {
	if e.Empty() {
		return msgs, nil
	}
	n := len(msgs)
	if e.Before != n {
		return nil, fmt.Errorf("the edit was made for a conversation of %d messages, not %d", e.Before, n)
	}
	touched := make(map[int]string, len(e.Replace)+len(e.Drop))
	mark := func(i int, what string) error {
		if i < 0 || i >= n {
			return fmt.Errorf("%s: index %d is outside the conversation (0..%d)", what, i, n-1)
		}
		if prev, ok := touched[i]; ok {
			return fmt.Errorf("%s: message %d is already in %s", what, i, prev)
		}
		touched[i] = what
		return nil
	}
	if c := e.Compact; c != nil {
		if c.From < 0 || c.To > n || c.From >= c.To {
			return nil, fmt.Errorf("compact: from %d to %d is not a range of the conversation (0..%d, to exclusive)", c.From, c.To, n)
		}
		if strings.TrimSpace(c.Summary) == "" {
			return nil, errors.New("compact: give the summary")
		}
		if c.Role != "" && c.Role != provider.RoleUser && c.Role != provider.RoleAssistant {
			return nil, fmt.Errorf("compact: role must be user or assistant, got %q", c.Role)
		}
		for i := c.From; i < c.To; i++ {
			touched[i] = "compact"
		}
	}
	replaced := map[int]provider.Message{}
	for k, r := range e.Replace {
		if err := mark(r.Index, "replace["+strconv.Itoa(k)+"]"); err != nil {
			return nil, err
		}
		if err := checkEditMessage(r.Message); err != nil {
			return nil, fmt.Errorf("replace[%d]: %v", k, err)
		}
		replaced[r.Index] = r.Message
	}
	for k, i := range e.Drop {
		if err := mark(i, "drop["+strconv.Itoa(k)+"]"); err != nil {
			return nil, err
		}
	}
	out := make([]provider.Message, 0, n)
	for i, m := range msgs {
		switch {
		case e.Compact != nil && i == e.Compact.From:
			role := e.Compact.Role
			if role == "" {
				role = provider.RoleUser
			}
			out = append(out, provider.Message{Role: role, Text: e.Compact.Summary})
		case e.Compact != nil && i > e.Compact.From && i < e.Compact.To:
		case slices.Contains(e.Drop, i):
		default:
			if r, ok := replaced[i]; ok {
				m = r
			}
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the edit leaves no message")
	}
	return out, nil
}

// Check is Apply for a resume that makes the edit: the edited conversation must pair
// every call with one result, whatever the conversation was before. A run's own steps
// always leave it paired at a pause; only the messages a run was started with can
// leave it otherwise (a start does not check them), and an edit of such a run must then
// pair them too, which the error says.
func (e *ConversationEdit) Check(msgs []provider.Message) ([]provider.Message, error) {
	out, err := e.Apply(msgs)
	if err != nil || e.Empty() {
		return out, err
	}
	if err := pairedCalls(out); err != nil {
		if before := pairedCalls(msgs); before != nil {
			return nil, fmt.Errorf("the edited conversation is not one a model takes: %v (before the edit: %v; an edit must leave every call paired)", err, before)
		}
		return nil, fmt.Errorf("the edited conversation is not one a model takes: %v", err)
	}
	return out, nil
}

// checkEditMessage refuses a message an edit cannot put in a conversation.
func checkEditMessage(m provider.Message) error {
	switch m.Role {
	case provider.RoleUser, provider.RoleAssistant:
		if len(m.ToolResults) > 0 {
			return fmt.Errorf("a %s message carries no tool results", m.Role)
		}
	case provider.RoleTool:
		if len(m.ToolResults) == 0 || m.Text != "" || len(m.ToolCalls) > 0 {
			return errors.New("a tool message carries tool results only")
		}
	default:
		return fmt.Errorf("role must be user, assistant or tool, got %q", m.Role)
	}
	if m.Role == provider.RoleUser && len(m.ToolCalls) > 0 {
		return errors.New("a user message makes no tool calls")
	}
	return nil
}

// pairedCalls says why msgs is not a conversation a model takes, naming the call: each
// call of an assistant message has exactly one result in the tool message or messages
// right after it (the planner writes one tool message per step; a conversation given at
// the start may hold one per result, as OpenAI's format does), and every result
// answers a call of that assistant message.
func pairedCalls(msgs []provider.Message) error {
	var made *provider.Message // the last assistant message that made calls, while its results follow
	from := -1                 // its index
	answered := map[string]bool{}
	for i, m := range msgs {
		if m.Role == provider.RoleTool {
			for _, tr := range m.ToolResults {
				switch {
				case made == nil:
					return fmt.Errorf("message %d answers call %q, which no message before it made", i, tr.CallID)
				case !slices.ContainsFunc(made.ToolCalls, func(tc provider.ToolCall) bool { return tc.ID == tr.CallID }):
					return fmt.Errorf("message %d answers call %q, which message %d did not make", i, tr.CallID, from)
				case answered[tr.CallID]:
					return fmt.Errorf("message %d answers call %q of message %d a second time", i, tr.CallID, from)
				}
				answered[tr.CallID] = true
			}
			continue
		}
		if err := unanswered(made, from, answered); err != nil {
			return err
		}
		made, from = nil, -1
		clear(answered)
		if len(m.ToolCalls) > 0 {
			made, from = &msgs[i], i
			for k, tc := range m.ToolCalls {
				if slices.ContainsFunc(m.ToolCalls[:k], func(o provider.ToolCall) bool { return o.ID == tc.ID }) {
					return fmt.Errorf("message %d makes call %q twice", i, tc.ID)
				}
			}
		}
	}
	return unanswered(made, from, answered)
}

// unanswered names the calls of made (message from) that have no result in answered.
func unanswered(made *provider.Message, from int, answered map[string]bool) error {
	if made == nil {
		return nil
	}
	var missing []string
	for _, tc := range made.ToolCalls {
		if !answered[tc.ID] {
			missing = append(missing, strconv.Quote(tc.ID))
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("call %s of message %d has no result after it", missing[0], from)
	}
	return fmt.Errorf("calls %s of message %d have no result after them", strings.Join(missing, ", "), from)
}
