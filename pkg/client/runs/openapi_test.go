package runs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner/plannerapi"
)

// The client's wire types and the schemas of the API's OpenAPI document they stand for.
// The types they hold are checked with them, recursively, against the schemas their
// fields have (events' and tools' types where those are the wire types).
var contract = []struct {
	value  any
	schema string // a JSON pointer into openapi.yaml
}{
	{StartRequest{}, "/components/schemas/StartRequest"},
	{ResumeRequest{}, "/components/schemas/ResumeRequest"},
	{FollowUp{}, "/components/schemas/FollowUp"},
	{ToolsChange{}, "/components/schemas/ToolsChange"},
	{Answer{}, "/components/schemas/ApprovalAnswer"},
	{Run{}, "/components/schemas/Run"},
	{RunPage{}, "/paths/~1v1~1runs/get/responses/200/content/application~1json/schema"},
	{ApprovalPage{}, "/paths/~1v1~1approvals/get/responses/200/content/application~1json/schema"},
	{toolList{}, "/paths/~1v1~1tools/get/responses/200/content/application~1json/schema"},
	{EventData{}, "/components/schemas/RunEvent"},
	{Error{}, "/components/schemas/Error"},
	{Message{}, "/components/schemas/Message"},
}

// Every field of every schema the client reads or sends is a field of its type, and
// every field of the type is one of the schema: a field added to one and not the other
// fails here, so the client never drops what the API says (runs get -o json) nor
// sends what it does not take.
func TestTypesMatchOpenAPI(t *testing.T) {
	raw, err := plannerapi.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range contract {
		typ := reflect.TypeOf(c.value)
		checkType(t, doc, typ, lookup(t, doc, c.schema), typ.Name()+" ~ "+c.schema)
	}
}

// checkType compares the JSON fields of the struct typ with the properties of schema,
// both ways, and goes on into the fields whose type and schema are both objects.
func checkType(t *testing.T, doc map[string]any, typ reflect.Type, schema map[string]any, where string) {
	t.Helper()
	schema = resolve(t, doc, schema)
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		t.Errorf("%s: the schema has no properties for %s", where, typ)
		return
	}
	fields := jsonFields(typ)
	for name := range props {
		if _, ok := fields[name]; !ok {
			t.Errorf("%s: the API's field %q is not in %s", where, name, typ)
		}
	}
	for name, ft := range fields {
		ps, ok := props[name].(map[string]any)
		if !ok {
			t.Errorf("%s: %s has field %q, which the API does not have", where, typ, name)
			continue
		}
		ft, ps = elem(t, doc, ft, ps)
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			checkType(t, doc, ft, ps, where+"/"+name)
		}
	}
}

// elem goes through pointers and arrays: the type and schema of an element.
func elem(t *testing.T, doc map[string]any, ft reflect.Type, ps map[string]any) (reflect.Type, map[string]any) {
	for {
		ps = resolve(t, doc, ps)
		switch {
		case ft.Kind() == reflect.Pointer:
			ft = ft.Elem()
		case ft.Kind() == reflect.Slice && ft != reflect.TypeFor[json.RawMessage]():
			items, _ := ps["items"].(map[string]any)
			if items == nil {
				return ft, ps
			}
			ft, ps = ft.Elem(), items
		default:
			return ft, ps
		}
	}
}

// jsonFields are the fields encoding/json writes of a struct type, by name.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for n, ft := range jsonFields(f.Type) {
				out[n] = ft
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func resolve(t *testing.T, doc map[string]any, s map[string]any) map[string]any {
	t.Helper()
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = lookup(t, doc, strings.TrimPrefix(ref, "#"))
	}
}

func lookup(t *testing.T, doc map[string]any, ptr string) map[string]any {
	t.Helper()
	var v any = doc
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no %s in openapi.yaml", ptr)
		}
		v = m[tok]
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("no schema at %s in openapi.yaml", ptr)
	}
	return m
}
