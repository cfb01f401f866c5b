package tools

import (
	"bytes"
	"encoding/json"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
)

// MaxDepth bounds the nesting of arguments and outputs (the arguments object itself is
// level 1). It is one tenth of encoding/json's own limit on purpose: what toolfleet
// accepts is wrapped again — arguments in a call event, an output in a result, both in a
// run's conversation — and whatever it accepts must still be answered and decoded by
// every reader. A deeper value is refused with a message saying it is nested too deeply.
const MaxDepth = jsonscan.MaxDepth

// JSONDepth returns how deeply b nests objects and arrays (a flat object is 1, a scalar
// 0), without checking the rest of its syntax. It costs one pass over b and no
// allocation.
func JSONDepth(b []byte) int { return jsonscan.Depth(b) }

// MarshalJSON is json.Marshal without HTML escaping: '<', '>' and '&' stay themselves
// instead of becoming six-byte \u escapes, so an output's size is what the tool wrote
// (json.Marshal would turn 200,000 '<' into 1.2 MB). Every output and event body toolfleet
// writes goes through it.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
