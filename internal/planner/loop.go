package planner

import (
	"bytes"
	"encoding/json"

	"github.com/toolfleet/toolfleet/internal/planner/runrec"
)

// callKey identifies a call by tool and arguments, with the arguments in canonical form
// (keys sorted, no insignificant space) so that {"a":1,"b":2} and { "b":2, "a":1 } count
// as the same call.
func callKey(tool string, args json.RawMessage) string {
	return tool + "\x00" + string(canonicalJSON(args))
}

// canonicalJSON re-encodes v with sorted object keys; invalid JSON is returned trimmed, as
// is, so that two identical invalid payloads still compare equal.
func canonicalJSON(raw json.RawMessage) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return bytes.TrimSpace(raw)
	}
	// A JSON string holding an object (OpenAI's form) is the same call as the object.
	if s, ok := v.(string); ok {
		return canonicalJSON(json.RawMessage(s))
	}
	out, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return bytes.TrimSpace(raw)
	}
	return out
}

// repeatRun returns how many calls at the end of history, counting the new call, are the
// same call as it. history holds callKeys in the order the calls were made.
func repeatRun(history []string, next string) int {
	var w runrec.LoopWindow
	for _, k := range history {
		w.Add(k)
	}
	return w.Add(next)
}
