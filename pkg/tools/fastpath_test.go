package tools_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// TestFastPathAgreesWithValidator runs edge cases through both validation paths: the fast
// path may be unsure, but it must never accept what the compiled validator refuses, and
// Hydrate must always end with the validator's answer.
func TestFastPathAgreesWithValidator(t *testing.T) {
	t.Parallel()
	schemas := map[string]string{
		"int bounds":   `{"type":"object","properties":{"v":{"type":"integer","minimum":1,"maximum":3}}}`,
		"excl bounds":  `{"type":"object","properties":{"v":{"type":"number","exclusiveMinimum":0.1,"exclusiveMaximum":0.3}}}`,
		"enum mixed":   `{"type":"object","properties":{"v":{"enum":[1,"a",null,true]}}}`,
		"const":        `{"type":"object","properties":{"v":{"const":2}}}`,
		"string rules": `{"type":"object","properties":{"v":{"type":"string","minLength":2,"maxLength":3,"pattern":"^[a-zé]+$"}}}`,
		"type array":   `{"type":"object","properties":{"v":{"type":["string","null"]}}}`,
		"items":        `{"type":"object","properties":{"v":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2}}}`,
		"additional":   `{"type":"object","properties":{"a":{}},"additionalProperties":{"type":"boolean"},"required":["a"]}`,
		"annotated":    `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","title":"t","properties":{"v":{"type":"string","format":"date","default":3,"examples":["x"]}}}`,
		"draft-07":     `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"v":{"type":"string","format":"date"}}}`,
		"uncovered":    `{"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`,
	}
	values := []string{`1`, `1.0`, `3`, `3.0`, `4`, `0.1`, `0.2`, `0.30000000000000001`, `2e0`, `-0`, `1e400`,
		`"a"`, `"ab"`, `"éé"`, `"abcd"`, `"a1"`, `"2024-01-01"`, `"not a date"`, `null`, `true`, `false`,
		`[]`, `[1]`, `[1,2]`, `[1,2,3]`, `[1.0]`, `["x"]`, `{}`, `{"x":1}`}
	covered := 0
	for name, schema := range schemas {
		reg := tools.NewRegistry()
		if err := reg.AddFunc(tools.Definition{Name: "s", Parameters: json.RawMessage(schema)}, okFunc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range values {
			for _, raw := range []string{fmt.Sprintf(`{"v":%s}`, v), fmt.Sprintf(`{"a":1,"b":%s}`, v)} {
				isCovered, fast, full := reg.FastAndFull("s", []byte(raw))
				if isCovered {
					covered++
				}
				if fast && !full {
					t.Errorf("%s: fast path accepts %s, the validator refuses it", name, raw)
				}
				if _, err := reg.Hydrate("s", []byte(raw)); (err == nil) != full {
					t.Errorf("%s: Hydrate(%s) = %v, validator says valid=%v", name, raw, err, full)
				}
			}
		}
		if cov, _, _ := reg.FastAndFull("s", []byte(`{}`)); cov != (name != "draft-07" && name != "uncovered") {
			t.Errorf("%s: covered = %v", name, cov)
		}
	}
	if covered == 0 {
		t.Error("the fast path covered nothing")
	}
}
