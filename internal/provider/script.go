package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Script is what a Scripted model answers from: its steps, tried in order, one per
// model turn. It is read from YAML or JSON:
//
//	name: weather-demo
//	steps:
//	  - text: Let me look both up.          # optional text beside the calls
//	    calls:                              # parallel calls in one turn
//	      - {name: get_weather, arguments: {city: Paris}}
//	      - {name: get_time, arguments: {zone: Europe/Paris}}
//	  - calls:
//	      - {name: convert, arguments: {amount: ten}}       # breaks the schema
//	  - when: {error: true}                 # only if a last result is an error
//	    calls:
//	      - {name: convert, arguments: {amount: 10}}        # the repair
//	  - calls:
//	      - {name: send_email, arguments: {to: ops@example.com}}  # an unsafe tool: needs approval
//	  - text: It is 18°C in Paris.          # the final answer
//	    usage: {input: 120, output: 12}     # optional fixed token counts
//	  - text: I am a script; I cannot answer that.
//	    repeat: true                        # answers every further message (follow-ups)
//
// A step is used once, unless it repeats: a repeating step (text only) answers every turn
// that reaches it, so a conversation's follow-ups get an answer instead of the script
// being used up.
type Script struct {
	// Name labels the model ("scripted/<name>"); a loaded file defaults to its base name.
	Name  string `yaml:"name" json:"name"`
	Steps []Step `yaml:"steps" json:"steps"`
}

// Step is one scripted turn: tool calls, text, or both.
type Step struct {
	// When, if set, makes the step conditional on the results of the previous turn's
	// calls; a step whose condition fails is skipped for good.
	When *When `yaml:"when,omitempty" json:"when,omitempty"`
	// Text is said by the model; a step with text and no calls is a final answer.
	Text string `yaml:"text,omitempty" json:"text,omitempty"`
	// Calls are made together, in one turn.
	Calls []ScriptCall `yaml:"calls,omitempty" json:"calls,omitempty"`
	// Usage, if set, is reported instead of the word count.
	Usage *ScriptUsage `yaml:"usage,omitempty" json:"usage,omitempty"`
	// Repeat keeps the step for the turns after it: a text answer to every further
	// message. A repeating step makes no calls (it would call for ever).
	Repeat bool `yaml:"repeat,omitempty" json:"repeat,omitempty"`
}

// When matches the tool results that precede a turn. Every field set must hold for one
// and the same result.
type When struct {
	// Error: true matches a failed result, false a successful one.
	Error *bool `yaml:"error,omitempty" json:"error,omitempty"`
	// Tool matches a result of this tool.
	Tool string `yaml:"tool,omitempty" json:"tool,omitempty"`
	// Contains matches a result whose content contains this text.
	Contains string `yaml:"contains,omitempty" json:"contains,omitempty"`
}

// ScriptCall is one scripted tool call.
type ScriptCall struct {
	Name string `yaml:"name" json:"name"`
	// Arguments is an object, sent as one; or a string, sent as it stands (a JSON string
	// of arguments, as OpenAI sends them), which lets a script send malformed JSON.
	Arguments any `yaml:"arguments,omitempty" json:"arguments,omitempty"`
}

// ScriptUsage fixes the token counts a step reports.
type ScriptUsage struct {
	Input  int `yaml:"input" json:"input"`
	Output int `yaml:"output" json:"output"`
}

// LoadScript reads a script file (YAML or JSON).
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("%w: scripted: %w", ErrConfig, err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return s, nil
}

// ParseScript reads a script from YAML or JSON and checks it: unknown fields, steps with
// neither text nor calls, calls without a valid tool name and arguments that are neither
// an object nor a string are errors.
func ParseScript(data []byte) (Script, error) {
	var s Script
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return Script{}, fmt.Errorf("%w: scripted: the script is empty", ErrConfig)
		}
		return Script{}, fmt.Errorf("%w: scripted: %v", ErrConfig, err)
	}
	if err := s.check(); err != nil {
		return Script{}, err
	}
	return s, nil
}

func (s Script) check() error {
	if len(s.Steps) == 0 {
		return fmt.Errorf("%w: scripted: the script has no steps", ErrConfig)
	}
	for i, st := range s.Steps {
		if st.Text == "" && len(st.Calls) == 0 {
			return fmt.Errorf("%w: scripted: step %d has neither text nor calls", ErrConfig, i+1)
		}
		if st.Repeat && len(st.Calls) > 0 {
			return fmt.Errorf("%w: scripted: step %d repeats and makes calls; a repeating step is a text answer", ErrConfig, i+1)
		}
		if st.When != nil && st.When.Error == nil && st.When.Tool == "" && st.When.Contains == "" {
			return fmt.Errorf("%w: scripted: step %d has an empty when; set error, tool or contains", ErrConfig, i+1)
		}
		for j, c := range st.Calls {
			if !tools.NamePattern.MatchString(c.Name) {
				return fmt.Errorf("%w: scripted: step %d, call %d: tool name %q does not match %s",
					ErrConfig, i+1, j+1, c.Name, tools.NamePattern)
			}
			if _, err := scriptArguments(c.Arguments); err != nil {
				return fmt.Errorf("%w: scripted: step %d, call %d (%s): %v", ErrConfig, i+1, j+1, c.Name, err)
			}
		}
	}
	return nil
}

// scriptArguments turns a call's scripted arguments into what a provider would send.
func scriptArguments(a any) (json.RawMessage, error) {
	switch v := a.(type) {
	case nil:
		return json.RawMessage(`{}`), nil
	case string, map[string]any:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("arguments must be an object or a string, got %T", a)
}

// matches reports whether the condition holds for the results.
func (w *When) matches(results []ToolResult) bool {
	if w == nil {
		return true
	}
	for _, r := range results {
		if w.Error != nil && *w.Error != r.IsError {
			continue
		}
		if w.Tool != "" && w.Tool != r.Name {
			continue
		}
		if w.Contains != "" && !strings.Contains(string(r.Content), w.Contains) && !strings.Contains(resultText(r.Content), w.Contains) {
			continue
		}
		return true
	}
	return false
}
