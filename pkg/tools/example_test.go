package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// GetWeather is the tool get_weather; its fields are its arguments.
type GetWeather struct {
	City  string `json:"city"`
	Units string `json:"units,omitempty"`
}

// Definition describes the tool; the schema is kept byte for byte.
func (GetWeather) Definition() tools.Definition {
	return tools.Definition{Name: "get_weather", Description: "Current weather for a city.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},` +
			`"units":{"type":"string","enum":["metric","imperial"]}},"required":["city"],"additionalProperties":false}`)}
}

// Run gets a fresh value per call, after the arguments passed the schema.
func (g *GetWeather) Run(ctx context.Context) (any, error) {
	return map[string]any{"city": g.City, "celsius": 21}, nil
}

func ExampleRegistry_Hydrate() {
	reg := tools.NewRegistry()
	tools.MustAdd[GetWeather](reg)

	// OpenAI sends the arguments as a JSON string; Anthropic and Ollama as an object.
	call, err := reg.Hydrate("get_weather", []byte(`"{\"city\":\"Lisbon\"}"`))
	if err != nil {
		panic(err)
	}
	out := call.Run(context.Background())
	fmt.Println(string(out.Output), out.Err == nil)

	// A bad call never runs; every violation says where it is.
	_, err = reg.Hydrate("get_weather", []byte(`{"units":"kelvin"}`))
	fmt.Println(errors.Is(err, tools.ErrInvalidInput))
	var te *tools.Error
	errors.As(err, &te)
	for _, v := range te.Violations {
		fmt.Printf("%q: %s\n", v.Pointer, v.Message)
	}
	// Output:
	// {"celsius":21,"city":"Lisbon"} true
	// true
	// "": missing property 'city'
	// "/units": value must be one of 'metric', 'imperial'
}

func ExampleRegistry_AddFunc() {
	reg := tools.NewRegistry()
	err := reg.AddFunc(tools.Definition{Name: "echo",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(ctx context.Context, args json.RawMessage) (any, error) { return args, nil })
	fmt.Println(err)

	// Without a schema, registration fails closed.
	err = reg.AddFunc(tools.Definition{Name: "shell"}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	fmt.Println(errors.Is(err, tools.ErrInvalidDefinition))
	// Output:
	// <nil>
	// true
}

func ExampleCallbacks() {
	reg := tools.NewRegistry()
	cache := map[string]any{`{"city":"Oslo"}`: "cached: rainy"}
	_ = reg.AddFunc(tools.Definition{Name: "forecast",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		func(ctx context.Context, args json.RawMessage) (any, error) { return nil, errors.New("service down") },
		tools.WithCallbacks(tools.Callbacks{
			// A non-nil answer short-circuits: the tool does not run.
			BeforeCall: func(ctx context.Context, input json.RawMessage) (any, error) {
				return cache[string(input)], nil
			},
			// A non-nil answer replaces the error output the model sees (here: the usual
			// {"error":{"code","message"}} and a hint).
			OnError: func(ctx context.Context, input json.RawMessage, e tools.ErrorOutput) (any, error) {
				return map[string]any{"error": e.Error, "hint": "try again later"}, nil
			},
		}))
	for _, args := range []string{`{"city":"Oslo"}`, `{"city":"Rome"}`} {
		call, _ := reg.Hydrate("forecast", []byte(args))
		out := call.Run(context.Background())
		fmt.Println(string(out.Output), out.Err)
	}
	// Output:
	// "cached: rainy" <nil>
	// {"error":{"code":"tool_error","message":"service down"},"hint":"try again later"} tool_error: service down
}

func ExampleRegistry_AddComposite() {
	reg := tools.NewRegistry()
	tools.MustAdd[GetWeather](reg)
	_ = reg.AddComposite("weather_batch", "Weather for several cities.", []string{"get_weather"})

	call, err := reg.Hydrate("weather_batch", []byte(`{"calls":[
		{"name":"get_weather","args":{"city":"Oslo"}},
		{"name":"get_time","args":{}}]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(call.Run(context.Background()).Output))
	// Output:
	// {"results":[{"name":"get_weather","result":{"celsius":21,"city":"Oslo"}},{"name":"get_time","result":{"error":{"code":"no_such_tool","message":"unknown sub-tool: get_time"}}}]}
}

// Stock is a typed tool with a dependency: prices is no argument, AddWith's constructor
// sets it for every call.
type Stock struct {
	Item string `json:"item"`

	prices map[string]float64
}

func (Stock) Definition() tools.Definition {
	return tools.Definition{Name: "stock_price", Description: "Price of an item.", Safe: true} // schema derived from the fields
}

func (s *Stock) Run(context.Context) (any, error) {
	return map[string]any{"item": s.Item, "price": s.prices[s.Item]}, nil
}

func ExampleAddWith() {
	prices := map[string]float64{"widget": 2.5} // made once, shared by every call
	reg := tools.NewRegistry()
	tools.MustAddWith(reg, func() Stock { return Stock{prices: prices} })

	call, err := reg.Hydrate("stock_price", []byte(`{"item":"widget"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(call.Run(context.Background()).Output))
	// Output: {"item":"widget","price":2.5}
}
