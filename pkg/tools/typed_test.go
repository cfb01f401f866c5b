package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// getWeather is a typed tool with an explicit schema.
type getWeather struct {
	City  string   `json:"city"`
	Units string   `json:"units,omitempty"`
	Days  int      `json:"days"`
	Tags  []string `json:"tags"`
}

func (getWeather) Definition() tools.Definition {
	return tools.Definition{Name: "get_weather", Description: "Current weather for a city.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},
			"units":{"type":"string","enum":["metric","imperial"]},"days":{"type":"integer","minimum":1},
			"tags":{"type":"array","items":{"type":"string"}}},"required":["city"],"additionalProperties":false}`)}
}

func (g *getWeather) Run(context.Context) (any, error) {
	if g.City == "Atlantis" {
		return nil, errors.New("no weather under water")
	}
	g.Days += 100 // mutating the value must not leak into the next call
	return g, nil
}

func TestTypedToolFreshValuePerCall(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	tools.MustAdd[getWeather](reg)
	for range 2 {
		c, err := reg.Hydrate("get_weather", []byte(`{"city":"Oslo","days":2}`))
		if err != nil {
			t.Fatal(err)
		}
		out := c.Run(context.Background())
		if out.Err != nil || string(out.Output) != `{"city":"Oslo","days":102,"tags":null}` {
			t.Errorf("outcome = %s, %v", out.Output, out.Err)
		}
	}
	c, _ := reg.Hydrate("get_weather", []byte(`"{\"city\":\"Atlantis\",\"tags\":[\"a\",\"b\"]}"`))
	out := c.Run(context.Background())
	wantCode(t, out.Err, tools.CodeToolFailed, "under water")
	if _, err := reg.Hydrate("get_weather", []byte(`{"city":"Oslo","units":"kelvin"}`)); !errors.Is(err, tools.ErrInvalidInput) {
		t.Errorf("enum not enforced: %v", err)
	}
}

// brokenTool has a definition that cannot be registered.
type brokenTool struct{}

func (brokenTool) Definition() tools.Definition {
	return tools.Definition{Name: "broken tool", Parameters: json.RawMessage(objSchema)}
}
func (*brokenTool) Run(context.Context) (any, error) { return nil, nil }

func TestAddAndMustAddRefuseBrokenDefinitions(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	wantCode(t, tools.Add[brokenTool](reg), tools.CodeInvalidDefinition, `"broken tool"`)
	defer func() {
		p := recover()
		err, _ := p.(error)
		if !errors.Is(err, tools.ErrInvalidDefinition) {
			t.Errorf("MustAdd panicked with %v, want an invalid_definition error", p)
		}
	}()
	tools.MustAdd[brokenTool](reg)
	t.Error("MustAdd did not panic")
}

// hooked implements every hook as a method, recording what it sees.
type hooked struct {
	Mode string `json:"mode"`
}

var hookTrace = &trace{}

func (hooked) Definition() tools.Definition {
	return tools.Definition{Name: "hooked", Parameters: json.RawMessage(`{"type":"object","properties":{"mode":{"type":"string"}}}`)}
}
func (h *hooked) Run(context.Context) (any, error) {
	hookTrace.add("run(%s)", h.Mode)
	if h.Mode == "fail" {
		return nil, errors.New("failed")
	}
	return h.Mode, nil
}
func (h *hooked) BeforeCall(_ context.Context, input json.RawMessage) (any, error) {
	hookTrace.add("BeforeCall(%s)", h.Mode)
	if h.Mode == "cached" {
		return "from cache", nil
	}
	return nil, nil
}
func (h *hooked) OnSuccess(_ context.Context, _ json.RawMessage, out any) (any, error) {
	hookTrace.add("OnSuccess(%v)", out)
	return nil, nil
}
func (h *hooked) OnError(_ context.Context, _ json.RawMessage, e tools.ErrorOutput) (any, error) {
	hookTrace.add("OnError(%s)", e.Error.Message)
	return nil, nil
}
func (h *hooked) FormatOutput(_ context.Context, out any) (any, error) {
	hookTrace.add("FormatOutput")
	return map[string]any{"out": out}, nil
}

func TestTypedHooks(t *testing.T) {
	// Not parallel: hookTrace is shared.
	reg := tools.NewRegistry()
	tools.MustAdd[hooked](reg)
	run := func(mode string) string {
		hookTrace.steps = nil
		c, err := reg.Hydrate("hooked", []byte(`{"mode":"`+mode+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		out := c.Run(context.Background())
		return hookTrace.String() + " = " + string(out.Output)
	}
	for mode, want := range map[string]string{
		"ok":     `BeforeCall(ok) > run(ok) > OnSuccess(ok) > FormatOutput = {"out":"ok"}`,
		"fail":   `BeforeCall(fail) > run(fail) > OnError(failed) > FormatOutput = {"out":{"error":{"code":"tool_error","message":"failed"}}}`,
		"cached": `BeforeCall(cached) > FormatOutput = {"out":"from cache"}`,
	} {
		if got := run(mode); got != want {
			t.Errorf("%s: %s\nwant %s", mode, got, want)
		}
	}
	// WithCallbacks wins over the method of the same kind; the other methods still run.
	reg2 := tools.NewRegistry()
	tools.MustAdd[hooked](reg2, tools.WithCallbacks(tools.Callbacks{
		FormatOutput: func(_ context.Context, out any) (any, error) { hookTrace.add("option"); return "opt", nil },
	}))
	hookTrace.steps = nil
	c, _ := reg2.Hydrate("hooked", []byte(`{"mode":"ok"}`))
	out := c.Run(context.Background())
	if got := hookTrace.String() + " = " + string(out.Output); got != `BeforeCall(ok) > run(ok) > OnSuccess(ok) > option = "opt"` {
		t.Errorf("with option: %s", got)
	}
}

// derived has no Parameters: its schema comes from its fields.
type derived struct {
	City    string            `json:"city" jsonschema:"description=City name, as written locally"`
	Units   string            `json:"units,omitempty" jsonschema:"enum=metric|imperial"`
	Days    int               `json:"days,omitempty" jsonschema:"required,enum=1|3|7"`
	Ratio   *float64          `json:"ratio"`
	Labels  map[string]string `json:"labels,omitempty"`
	Nested  struct{ On bool } `json:"nested,omitempty"`
	Skipped string            `json:"-"`
	//lint:ignore U1000 never read: it is here so that derivation is seen to leave it out of the schema
	private int
}

func (derived) Definition() tools.Definition        { return tools.Definition{Name: "derived"} }
func (d *derived) Run(context.Context) (any, error) { return d, nil }

func TestDerivedSchema(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	tools.MustAdd[derived](reg)
	d, _ := reg.Lookup("derived")
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
		Additional bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(d.Parameters, &s); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Required, []string{"city", "days"}) || s.Additional {
		t.Errorf("required = %v, additionalProperties = %v", s.Required, s.Additional)
	}
	if s.Properties["city"]["description"] != "City name, as written locally" || s.Properties["ratio"]["type"] != "number" {
		t.Errorf("properties = %v", s.Properties)
	}
	if _, ok := s.Properties["Skipped"]; ok {
		t.Error("json:\"-\" field described")
	}
	for raw, ok := range map[string]bool{
		`{"city":"Oslo","days":3}`: true,
		`{"city":"Oslo","days":3,"units":"metric","labels":{"a":"b"},"nested":{"On":true},"ratio":0.5}`: true,
		`{"city":"Oslo"}`:                      false, // days required by tag
		`{"city":"Oslo","days":2}`:             false, // enum
		`{"city":"Oslo","days":3,"units":"K"}`: false,
		`{"city":"Oslo","days":3,"zzz":1}`:     false,
	} {
		c, err := reg.Hydrate("derived", []byte(raw))
		if (err == nil) != ok {
			t.Errorf("%s: err = %v, want ok=%v", raw, err, ok)
			continue
		}
		if ok {
			var back derived
			json.Unmarshal([]byte(raw), &back)
			out := c.Run(context.Background())
			var got derived
			json.Unmarshal(out.Output, &got)
			if !reflect.DeepEqual(got, back) {
				t.Errorf("%s: decoded %+v, want %+v", raw, got, back)
			}
		}
	}
	if _, err := tools.SchemaFor[chan int](); err == nil {
		t.Error("SchemaFor[chan int] succeeded")
	}
}

// decodeCase is a tool whose argument types exercise the direct decoder; its schema
// accepts anything, so the decoder alone is compared with encoding/json.
type decodeCase struct {
	S    string             `json:"s"`
	B    bool               `json:"b"`
	I    int64              `json:"i"`
	I8   int8               `json:"i8"`
	U    uint16             `json:"u"`
	F    float32            `json:"f"`
	P    *int               `json:"p"`
	A    any                `json:"a"`
	L    []map[string]*bool `json:"l"`
	M    map[string][]int   `json:"m"`
	N    *decodeInner       `json:"n"`
	Case string             // matched case-insensitively, as by encoding/json
	Rec  []decodeCase       `json:"rec"`
}

type decodeInner struct {
	X float64 `json:"x"`
	Y string
}

func (decodeCase) Definition() tools.Definition {
	return tools.Definition{Name: "decode", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (d *decodeCase) Run(context.Context) (any, error) { return d, nil }

// withTime is decoded by encoding/json: time.Time has its own UnmarshalJSON.
type withTime struct {
	When time.Time `json:"when"`
	Raw  []byte    `json:"raw"`
}

func (withTime) Definition() tools.Definition {
	return tools.Definition{Name: "with_time", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (w *withTime) Run(context.Context) (any, error) { return w, nil }

func TestTypedDecodingMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	tools.MustAdd[decodeCase](reg)
	tools.MustAdd[withTime](reg)
	if !tools.DirectDecoder(reflect.TypeFor[decodeCase]()) || tools.DirectDecoder(reflect.TypeFor[withTime]()) {
		t.Fatal("decodeCase must take the direct decoder and withTime encoding/json")
	}
	inputs := []string{
		`{}`,
		`{"s":"h\u00e9llo \ud83d\ude00","b":true,"i":-9007199254740993,"i8":-128,"u":65535,"f":1.5,"p":7}`,
		`{"a":{"x":[1,2.5,"s",null,true,{"y":1e3}]},"l":[{"k":true,"n":null}],"m":{"a":[1,2],"b":null}}`,
		`{"n":{"x":0.1,"Y":"y"},"CASE":"upper","rec":[{"s":"inner","rec":[{"i":1}]}]}`,
		`{"s":null,"p":null,"n":null,"l":null,"unknown":{"deep":[1]}}`,
		`{"i":1.5}`,  // not an int: both refuse
		`{"i8":300}`, // overflow
		`{"s":12}`,   // wrong type
		`{"u":-1}`,
		`{"f":1e39}`,    // overflows float32
		`{"a":[1e400]}`, // overflows float64 inside any
		`{"m":{"a":[1,"x"]}}`,
		`{"Case":"first","case":"second","CASE":"third"}`, // the last one wins, as in encoding/json
		`{"n":{"y":"a","Y":"b"}}`,
	}
	for _, raw := range inputs {
		c, err := reg.Hydrate("decode", []byte(raw))
		var want decodeCase
		wantErr := json.Unmarshal([]byte(raw), &want)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: hydrate err = %v, encoding/json err = %v", raw, err, wantErr)
			continue
		}
		if err != nil {
			wantCode(t, err, tools.CodeInvalidInput, "cannot be decoded")
			continue
		}
		out := c.Run(context.Background())
		gotJSON, _ := json.Marshal(want)
		if string(out.Output) != string(gotJSON) {
			t.Errorf("%s:\n got %s\nwant %s", raw, out.Output, gotJSON)
		}
	}
	c, err := reg.Hydrate("with_time", []byte(`{"when":"2024-05-01T10:00:00Z","raw":"aGk="}`))
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(context.Background()); string(out.Output) != `{"when":"2024-05-01T10:00:00Z","raw":"aGk="}` {
		t.Errorf("with_time: %s", out.Output)
	}
}

func TestFuncToolGetsValidatedArguments(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	var mu sync.Mutex
	var seen []string
	err := reg.AddFunc(tools.Definition{Name: "f", Parameters: json.RawMessage(objSchema)},
		func(_ context.Context, args json.RawMessage) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, string(args))
			return nil, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	c, err := reg.Hydrate("f", []byte(`"{\"q\":\"a\\\"b\"}"`))
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background())
	if strings.Join(seen, "|") != `{"q":"a\"b"}` || string(out.Output) != "null" {
		t.Errorf("seen = %v, output = %s", seen, out.Output)
	}
}

// inventory is a dependency: a store the tools below read, shared by every call.
type inventory struct {
	mu    sync.Mutex
	stock map[string]int
	reads int
}

func (i *inventory) count(item string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.reads++
	return i.stock[item]
}

// stockLevel needs the inventory: an unexported field the arguments cannot reach.
type stockLevel struct {
	Item string `json:"item"`
	Unit string `json:"unit,omitempty"`

	inv *inventory
}

func (stockLevel) Definition() tools.Definition {
	return tools.Definition{Name: "stock_level", Description: "Items in stock.", Safe: true} // schema derived
}

func (s *stockLevel) Run(context.Context) (any, error) {
	return map[string]any{"item": s.Item, "count": s.inv.count(s.Item), "unit": s.Unit}, nil
}

// restockDate needs the inventory too, through an exported field tagged `json:"-"`; its
// time.Time argument is decoded by encoding/json rather than the direct decoder.
type restockDate struct {
	After time.Time  `json:"after"`
	Inv   *inventory `json:"-"`
}

func (restockDate) Definition() tools.Definition {
	return tools.Definition{Name: "restock_date", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"after":{"type":"string"}},"required":["after"]}`)}
}

func (r *restockDate) Run(context.Context) (any, error) {
	return map[string]any{"after": r.After.Format(time.DateOnly), "count": r.Inv.count("widget")}, nil
}

func TestAddWithGivesTypedToolsTheirDependencies(t *testing.T) {
	t.Parallel()
	inv := &inventory{stock: map[string]int{"widget": 7, "bolt": 3}}
	reg := tools.NewRegistry()
	var made int
	var mu sync.Mutex
	tools.MustAddWith(reg, func() stockLevel {
		mu.Lock()
		made++
		mu.Unlock()
		return stockLevel{inv: inv, Unit: "pieces"} // Unit: the value a call that leaves it out gets
	})
	if err := tools.AddWith(reg, func() restockDate { return restockDate{Inv: inv} }); err != nil {
		t.Fatal(err)
	}

	def, _ := reg.Lookup("stock_level")
	var schema struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(def.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Properties) != 2 || schema.Properties["item"] == nil || schema.Properties["unit"] == nil {
		t.Errorf("derived schema %s, want only item and unit", def.Parameters)
	}

	for _, tt := range []struct {
		name, tool, args, want string
	}{
		{"unexported dependency", "stock_level", `{"item":"bolt","unit":"boxes"}`, `{"count":3,"item":"bolt","unit":"boxes"}`},
		{"constructor's value for an argument left out", "stock_level", `{"item":"widget"}`, `{"count":7,"item":"widget","unit":"pieces"}`},
		{"json:\"-\" dependency, encoding/json path", "restock_date", `{"after":"2026-01-02T00:00:00Z"}`, `{"after":"2026-01-02","count":7}`},
	} {
		c, err := reg.Hydrate(tt.tool, []byte(tt.args))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if out := c.Run(t.Context()); out.Err != nil || string(out.Output) != tt.want {
			t.Errorf("%s: outcome %s, %v; want %s", tt.name, out.Output, out.Err, tt.want)
		}
	}
	// An argument cannot overwrite the dependency, whatever its name.
	c, err := reg.Hydrate("restock_date", []byte(`{"after":"2026-01-02T00:00:00Z","Inv":null,"-":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(t.Context()); out.Err != nil {
		t.Errorf("dependency reachable from the arguments: %v", out.Err)
	}
	if made != 2 || inv.reads != 4 {
		t.Errorf("constructor called %d times, inventory read %d times; want 2 and 4", made, inv.reads)
	}
}

func TestAddWithNilConstructor(t *testing.T) {
	t.Parallel()
	err := tools.AddWith[stockLevel](tools.NewRegistry(), nil)
	wantCode(t, err, tools.CodeInvalidDefinition, "constructor is nil")
}
