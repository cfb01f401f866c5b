package main

import "fmt"

// modelReply is an instant scripted model's turn, as DBOS and Temporal record it: a
// call of the tool, or the answer.
type modelReply struct {
	Tool      string `json:"tool,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Text      string `json:"text,omitempty"`
}

// modelTurn is turn i of a run of steps tool steps: a call of echo with arguments of
// its own until the last turn, which answers "done" (toolfleetScript, as a function).
func modelTurn(i, steps int) modelReply {
	if i < steps {
		return modelReply{Tool: "echo", Arguments: fmt.Sprintf(`{"value":"step %d"}`, i+1)}
	}
	return modelReply{Text: "done"}
}

// echo is the tool: it returns its arguments unchanged.
func echo(args string) string { return args }
