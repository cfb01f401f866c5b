package provider

import (
	"fmt"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ChoiceMode is how the model may use its tools.
type ChoiceMode string

// Tool choice modes.
const (
	// ChoiceAuto lets the model decide (the zero value means the same).
	ChoiceAuto ChoiceMode = "auto"
	// ChoiceRequired makes the model call at least one tool.
	ChoiceRequired ChoiceMode = "required"
	// ChoiceNone forbids tool calls; the tools are still described where the provider
	// needs them to read the conversation.
	ChoiceNone ChoiceMode = "none"
	// ChoiceTool makes the model call the one tool named in ToolChoice.Tool.
	ChoiceTool ChoiceMode = "tool"
)

// ToolChoice says whether and which tools the model must call. The zero value is auto.
//
// How each provider receives it:
//
//	             auto                     required             none                  tool NAME
//	OpenAI       "auto"                   "required"           "none"                {"type":"function","function":{"name":NAME}}
//	Anthropic    {"type":"auto"}          {"type":"any"}       {"type":"none"}       {"type":"tool","name":NAME}
//	Ollama       tools sent               tools + instruction  no tools sent         only NAME sent + instruction
//
// Ollama has no tool_choice: "none" is exact (no tools are offered), while "required"
// and a named tool are emulated by a line added to the system instructions (and, for a
// named tool, by offering that tool alone); the model may still answer in text.
// No provider accepts a tool choice without tools, so none is sent when Tools is empty.
type ToolChoice struct {
	Mode ChoiceMode `json:"mode,omitempty"`
	// Tool names the tool for ChoiceTool.
	Tool string `json:"tool,omitempty"`
}

// Convenience values.
var (
	ToolChoiceAuto     = ToolChoice{Mode: ChoiceAuto}
	ToolChoiceRequired = ToolChoice{Mode: ChoiceRequired}
	ToolChoiceNone     = ToolChoice{Mode: ChoiceNone}
)

// ToolChoiceFor makes the model call the named tool.
func ToolChoiceFor(name string) ToolChoice { return ToolChoice{Mode: ChoiceTool, Tool: name} }

// ParseToolChoice reads "auto", "required", "none", "tool:NAME" or a bare tool name.
// The empty string is auto.
func ParseToolChoice(s string) (ToolChoice, error) {
	switch s {
	case "", "auto":
		return ToolChoiceAuto, nil
	case "required", "none":
		return ToolChoice{Mode: ChoiceMode(s)}, nil
	}
	name := strings.TrimPrefix(s, "tool:")
	if !tools.NamePattern.MatchString(name) {
		return ToolChoice{}, fmt.Errorf("%w: tool choice %q: want auto, required, none or a tool name matching %s",
			ErrInvalidRequest, s, tools.NamePattern)
	}
	return ToolChoiceFor(name), nil
}

// String returns the form ParseToolChoice reads.
func (c ToolChoice) String() string {
	if c.Mode == ChoiceTool {
		return "tool:" + c.Tool
	}
	return string(c.mode())
}

func (c ToolChoice) mode() ChoiceMode {
	if c.Mode == "" {
		return ChoiceAuto
	}
	return c.Mode
}

// check reports a choice that cannot be sent with these tools.
func (c ToolChoice) check(defs []tools.Definition) error {
	switch c.mode() {
	case ChoiceAuto, ChoiceRequired, ChoiceNone:
		if c.Tool != "" {
			return fmt.Errorf("%w: tool choice %q names a tool (%q); use mode %q", ErrInvalidRequest, c.Mode, c.Tool, ChoiceTool)
		}
		if c.mode() == ChoiceRequired && len(defs) == 0 {
			return fmt.Errorf("%w: tool choice \"required\" but the request offers no tools", ErrInvalidRequest)
		}
		return nil
	case ChoiceTool:
		for _, d := range defs {
			if d.Name == c.Tool {
				return nil
			}
		}
		return fmt.Errorf("%w: tool choice names %q, which is not among the request's tools", ErrInvalidRequest, c.Tool)
	}
	return fmt.Errorf("%w: unknown tool choice mode %q", ErrInvalidRequest, c.Mode)
}
