package events

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/testfill"
)

// TestFastPathsKnowEveryField fills every field of a result, a run event and a call (recursively:
// the error and its violations, the approval, the payload refs, the metadata) and
// checks that the hand-written encoders write what encoding/json writes and that the
// call decoder reads back what encoding/json reads: a field added to these types and
// not to jsonfast.go fails here, whatever the random tests happen to set.
func TestFastPathsKnowEveryField(t *testing.T) {
	var r Result
	testfill.Fill(t, reflect.ValueOf(&r).Elem(), "Result", nil)
	r.Output = json.RawMessage(`{"v":1}`)
	b, err := marshalResult(&r)
	sameAsReflection(t, r, b, err)
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("the result's encoding does not read back as the result (%v):\n%s", err, b)
	}

	var re RunEvent
	testfill.Fill(t, reflect.ValueOf(&re).Elem(), "RunEvent", nil)
	re.Detail = json.RawMessage(`{"text":"a <b> & \u2028 c","n":[1,2.5e3]}`)
	b, err = marshalRunEvent(&re)
	sameAsReflection(t, re, b, err)

	for _, withRef := range []bool{false, true} {
		var c Call
		skip := map[reflect.Type]map[string]bool{}
		if !withRef { // a call carries arguments or a reference, not both
			// A run context (rare) is left to encoding/json: the decoder declines it.
			skip[reflect.TypeFor[Call]()] = map[string]bool{"ArgumentsRef": true, "Context": true, "ContextRef": true}
		}
		testfill.Fill(t, reflect.ValueOf(&c).Elem(), "Call", skip)
		c.Arguments = json.RawMessage(`{"a":[1,"x"]}`)
		b, err := marshalCall(&c)
		sameAsReflection(t, c, b, err)
		var want Call
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		var got Call
		if decodeCallData(b, &got) && !reflect.DeepEqual(got, want) {
			t.Fatalf("the call decoder read %s as\n%#v\nencoding/json as\n%#v", b, got, want)
		}
		if !withRef && !reflect.DeepEqual(got, want) {
			t.Fatalf("the call decoder declined a plain call: %s", b)
		}
	}
}
