package tools_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/shareddata"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The BFCL files with ground truth; irrelevance has definitions only.
var bfclCategories = []string{"simple_python", "multiple", "parallel", "parallel_multiple",
	"simple_java", "simple_javascript", "irrelevance"}

// bfclKnownInvalid lists the ground-truth calls that cannot validate, by record id and call
// index, with the reason from the data's README ("Known data quirks"). The test asserts
// that exactly these fail: a regression either way breaks it.
var bfclKnownInvalid = map[string]string{
	"simple_java_26#0":       "answer gives constant names (ResultSet.CONCUR_READ_ONLY...) for integer parameters",
	"simple_java_87#0":       "answer gives \"EVENT_THREAD\" for an integer parameter",
	"simple_java_88#0":       "answer gives \"EventRequest.SUSPEND_ALL\" for an integer parameter",
	"simple_java_38#0":       "answer gives the variable name \"docFields\" for a HashMap",
	"simple_java_45#0":       "answer gives the variable name \"envVariables\" for a HashMap",
	"simple_java_58#0":       "answer gives the variable name \"userProfile\" for a HashMap",
	"simple_java_35#0":       "answer gives a literal string for an Array",
	"simple_java_69#0":       "answer gives the variable name \"durations\" for an Array",
	"simple_java_72#0":       "answer gives the variable name \"textBuffer\" for an Array<char>",
	"simple_java_82#0":       "answer gives the variable name \"testArgs\" for an Array",
	"simple_javascript_5#0":  "answer gives source expressions for nested dict parameters",
	"simple_javascript_9#0":  "answer gives the variable name \"responseData\" for a dict",
	"simple_javascript_15#0": "answer gives variable names for dict and array parameters",
	"simple_javascript_19#0": "answer gives variable names for dict and array parameters",
	"simple_javascript_11#0": "answer gives the variable name \"myItemList\" for an array",
	"simple_javascript_32#0": "answer gives the variable name \"fileWatchQueue\" for an array",
	"simple_javascript_37#0": "answer gives the variable name \"shapeStatements\" for an array",
	"simple_javascript_39#0": "answer gives the variable name \"funcParameters\" for an array",
	"parallel_multiple_21#1": "answer gives Python expressions data['sales'] for array<float> parameters",
	"parallel_multiple_94#0": "schema declares integer items where the answer sorts fruit names",
	"parallel_multiple_26#1": "answer names a parameter \"type\" that is not in the schema",
}

type bfclFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type bfclRecord struct {
	ID       string         `json:"id"`
	Function []bfclFunction `json:"function"`
}

type bfclAnswer struct {
	ID          string           `json:"id"`
	GroundTruth []map[string]any `json:"ground_truth"`
}

// bfclCall is one concrete ground-truth call, ready to hydrate.
type bfclCall struct {
	key    string // record id#index
	tool   string
	args   []byte
	schema map[string]any // the converted parameters of the tool
}

// bfclSet is one record: its tools registered in a registry of its own (a name may mean
// different functions in different records), and its ground-truth calls.
type bfclSet struct {
	id    string
	reg   *tools.Registry
	calls []bfclCall
}

type bfclData struct {
	sets          []bfclSet
	definitions   int
	unconvertible []string
}

// loadBFCL reads every record, converts and registers every definition and builds every
// ground-truth call.
func loadBFCL(tb testing.TB) *bfclData {
	tb.Helper()
	dir := shareddata.Require(tb, "bfcl")
	d := &bfclData{}
	for _, cat := range bfclCategories {
		records := readJSONLines[bfclRecord](tb, filepath.Join(dir, "BFCL_v4_"+cat+".json"))
		var answers []bfclAnswer
		if cat != "irrelevance" {
			answers = readJSONLines[bfclAnswer](tb, filepath.Join(dir, "possible_answer", "BFCL_v4_"+cat+".json"))
			if len(answers) != len(records) {
				tb.Fatalf("%s: %d records but %d answers", cat, len(records), len(answers))
			}
		}
		for i, rec := range records {
			set := bfclSet{id: rec.ID, reg: tools.NewRegistry()}
			schemas := map[string]map[string]any{}
			for _, fn := range rec.Function {
				d.definitions++
				schema, err := convertBFCL(fn.Parameters)
				if err != nil {
					d.unconvertible = append(d.unconvertible, fmt.Sprintf("%s %s: %v", rec.ID, fn.Name, err))
					continue
				}
				params, err := json.Marshal(schema)
				if err != nil {
					tb.Fatal(err)
				}
				name := strings.ReplaceAll(fn.Name, ".", "_")
				def := tools.Definition{Name: name, Description: fn.Description, Parameters: params, Strict: true, Safe: true}
				if err := set.reg.AddFunc(def, echo); err != nil {
					d.unconvertible = append(d.unconvertible, fmt.Sprintf("%s %s: %v", rec.ID, fn.Name, err))
					continue
				}
				schemas[name] = schema
			}
			if answers != nil {
				if answers[i].ID != rec.ID {
					tb.Fatalf("%s: answer %d has id %s, want %s", cat, i, answers[i].ID, rec.ID)
				}
				for j, gt := range answers[i].GroundTruth {
					for fname, answer := range gt {
						name := strings.ReplaceAll(fname, ".", "_")
						args := concreteArgs(answer.(map[string]any), schemas[name])
						b, err := json.Marshal(args)
						if err != nil {
							tb.Fatal(err)
						}
						set.calls = append(set.calls, bfclCall{key: fmt.Sprintf("%s#%d", rec.ID, j), tool: name, args: b, schema: schemas[name]})
					}
				}
			}
			d.sets = append(d.sets, set)
		}
	}
	return d
}

func echo(_ context.Context, args json.RawMessage) (any, error) { return args, nil }

func readJSONLines[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber() // keep number literals as written
		var v T
		if err := dec.Decode(&v); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// bfclTypes maps BFCL's dialect types to JSON Schema types ("" = no type constraint).
var bfclTypes = map[string]string{
	"dict": "object", "HashMap": "object", "Hashtable": "object",
	"float": "number", "double": "number",
	"integer": "integer", "long": "integer", "short": "integer", "byte": "integer", "Bigint": "integer",
	"string": "string", "String": "string", "char": "string",
	"boolean": "boolean", "Boolean": "boolean",
	"array": "array", "tuple": "array", "Array": "array", "ArrayList": "array",
	"Queue": "array", "Stack": "array", "Set": "array",
	"any": "", "": "",
}

// convertBFCL turns a BFCL parameters object into standard JSON Schema, by the rules of
// the data's README.
func convertBFCL(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	s, err := convertBFCLNode(v, "")
	if err != nil {
		return nil, err
	}
	s["type"] = "object"
	s["additionalProperties"] = false
	delete(s, "default") // 2 defaults sit on the parameters object itself
	return s, nil
}

func convertBFCLNode(v map[string]any, at string) (map[string]any, error) {
	out := map[string]any{}
	for k, x := range v {
		switch k {
		case "type":
			t, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("%s: type is %T, want a string", at, x)
			}
			js, ok := bfclTypes[t]
			if !ok {
				return nil, fmt.Errorf("%s: unknown type %q", at, t)
			}
			if js != "" {
				out["type"] = js
			}
		case "description", "enum", "default", "required", "format", "maximum", "minItems", "maxItems":
			out[k] = x
		case "optional":
			// Not a JSON Schema keyword and used inconsistently: only required decides.
		case "properties":
			props, ok := x.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: properties is %T", at, x)
			}
			conv := map[string]any{}
			for name, p := range props {
				pm, ok := p.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%s/%s: property schema is %T", at, name, p)
				}
				c, err := convertBFCLNode(pm, at+"/"+name)
				if err != nil {
					return nil, err
				}
				conv[name] = c
			}
			out[k] = conv
		case "items":
			im, ok := x.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: items is %T", at, x)
			}
			c, err := convertBFCLNode(im, at+"/items")
			if err != nil {
				return nil, err
			}
			out[k] = c
		default:
			return nil, fmt.Errorf("%s: keyword %q has no mapping", at, k)
		}
	}
	return out, nil
}

// concreteArgs builds a call from an answer map: per parameter, the first acceptable value,
// omitted when that is "" (unless the schema requires the parameter: then the first
// non-empty value), recursing into objects and lists of objects.
func concreteArgs(answer map[string]any, schema map[string]any) map[string]any {
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	props, _ := schema["properties"].(map[string]any)
	out := map[string]any{}
	for name, alts := range answer {
		sub, _ := props[name].(map[string]any)
		list, ok := alts.([]any)
		if !ok { // a nested value not wrapped in a list (simple_java_64): take it as is
			out[name] = alts
			continue
		}
		var chosen any
		found := false
		for i, a := range list {
			if a == "" {
				if i == 0 && !required[name] {
					break
				}
				continue
			}
			chosen, found = a, true
			break
		}
		if !found {
			continue
		}
		out[name] = concreteValue(chosen, sub)
	}
	return out
}

func concreteValue(v any, schema map[string]any) any {
	switch x := v.(type) {
	case map[string]any:
		return concreteArgs(x, schema)
	case []any:
		items, _ := schema["items"].(map[string]any)
		out := make([]any, len(x))
		for i, e := range x {
			if m, ok := e.(map[string]any); ok {
				out[i] = concreteArgs(m, items)
			} else {
				out[i] = e
			}
		}
		return out
	default:
		return v
	}
}

func TestBFCL(t *testing.T) {
	d := loadBFCL(t)
	if len(d.unconvertible) > 0 {
		t.Errorf("%d definitions could not be converted or registered:\n%s", len(d.unconvertible), strings.Join(d.unconvertible, "\n"))
	}
	if d.definitions != 2067 {
		t.Errorf("definitions = %d, want 2067", d.definitions)
	}
	var total, passed int
	failed := map[string]string{}
	var valid []bfclCall
	var validSets []*tools.Registry
	for _, set := range d.sets {
		for _, c := range set.calls {
			total++
			fastCheck(t, set.reg, c.tool, c.args)
			call, err := set.reg.Hydrate(c.tool, c.args)
			if err != nil {
				failed[c.key] = err.Error()
				var te *tools.Error
				if !errors.As(err, &te) || te.Code != tools.CodeInvalidInput || len(te.Violations) == 0 {
					t.Errorf("%s: want invalid_tool_input with violations, got %v", c.key, err)
				}
				continue
			}
			if !call.Validated() {
				t.Errorf("%s: call not validated", c.key)
			}
			passed++
			valid = append(valid, c)
			validSets = append(validSets, set.reg)
		}
	}
	t.Logf("definitions converted and registered: %d of %d; ground-truth calls: %d, validated: %d, known data defects: %d",
		d.definitions-len(d.unconvertible), d.definitions, total, passed, len(failed))
	if total != 1897 {
		t.Errorf("ground-truth calls = %d, want 1897", total)
	}
	for key, msg := range failed {
		if _, ok := bfclKnownInvalid[key]; !ok {
			t.Errorf("%s fails but is not a known data defect: %s", key, msg)
		}
	}
	for key, reason := range bfclKnownInvalid {
		if _, ok := failed[key]; !ok {
			t.Errorf("%s validates, but is listed as a known data defect (%s)", key, reason)
		}
	}

	t.Run("mutations", func(t *testing.T) {
		var missing, wrongType, fraction, unknown int
		for i, c := range valid {
			reg := validSets[i]
			var args map[string]any
			dec := json.NewDecoder(bytes.NewReader(c.args))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				t.Fatal(err)
			}
			props, _ := c.schema["properties"].(map[string]any)
			req, _ := c.schema["required"].([]any)
			for _, r := range req {
				name := r.(string)
				if _, ok := args[name]; !ok {
					continue
				}
				m := clone(args)
				delete(m, name)
				expectRefused(t, reg, c, m, "", "missing propert", name)
				missing++
			}
			for _, name := range sortedKeys(args) {
				p, _ := props[name].(map[string]any)
				typ, _ := p["type"].(string)
				if typ == "" {
					continue
				}
				m := clone(args)
				m[name] = wrongValue(typ)
				expectRefused(t, reg, c, m, "/"+name, "want "+typ)
				wrongType++
				if typ == "integer" {
					m[name] = json.Number("1.5")
					expectRefused(t, reg, c, m, "/"+name, "want integer")
					fraction++
				}
			}
			m := clone(args)
			m["zz_not_a_parameter"] = true
			expectRefused(t, reg, c, m, "", "additional properties", "zz_not_a_parameter")
			unknown++
		}
		t.Logf("mutations refused: missing required %d, wrong type %d, 1.5 for integer %d, unknown argument %d",
			missing, wrongType, fraction, unknown)
		if missing == 0 || wrongType == 0 || fraction == 0 || unknown != len(valid) {
			t.Errorf("too few mutations: %d %d %d %d", missing, wrongType, fraction, unknown)
		}
	})
}

// expectRefused hydrates a mutated call and checks it is refused with a violation at
// pointer whose message contains every word.
func expectRefused(t *testing.T, reg *tools.Registry, c bfclCall, args map[string]any, pointer string, words ...string) {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	fastCheck(t, reg, c.tool, b)
	_, err = reg.Hydrate(c.tool, b)
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != tools.CodeInvalidInput {
		t.Errorf("%s %s: mutated call %s: want invalid_tool_input, got %v", c.key, c.tool, b, err)
		return
	}
	for _, v := range te.Violations {
		if v.Pointer != pointer {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(v.Message, w)
		}
		if ok {
			return
		}
	}
	t.Errorf("%s: mutated call %s: no violation at %q mentioning %q; got %+v", c.key, b, pointer, words, te.Violations)
}

// fastCheck asserts that the fast validation path never accepts what the compiled
// validator refuses.
func fastCheck(t *testing.T, reg *tools.Registry, tool string, args []byte) {
	t.Helper()
	covered, fast, full := reg.FastAndFull(tool, args)
	if covered && fast && !full {
		t.Errorf("%s %s: the fast path accepts what the validator refuses", tool, args)
	}
	if covered && !fast && full {
		t.Logf("%s %s: fast path unsure, validator accepts", tool, args)
	}
}

func wrongValue(typ string) any {
	switch typ {
	case "string":
		return json.Number("12345")
	case "integer", "number":
		return "12345"
	case "boolean":
		return "true"
	case "array":
		return "a, b"
	default: // object
		return []any{"a"}
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
