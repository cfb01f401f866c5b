package tools_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// benchWeather is a typed tool with three arguments, the common small case.
type benchWeather struct {
	City  string  `json:"city"`
	Days  int     `json:"days"`
	Units *string `json:"units,omitempty"`
}

func (benchWeather) Definition() tools.Definition {
	return tools.Definition{Name: "bench_weather", Description: "Forecast for a city.", Safe: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"city":{"type":"string","minLength":1},
			"days":{"type":"integer","minimum":1,"maximum":14},
			"units":{"type":"string","enum":["metric","imperial"]}},
			"required":["city","days"],"additionalProperties":false}`)}
}

func (*benchWeather) Run(context.Context) (any, error) { return nil, nil }

// benchWeatherRef is benchWeather with its schema behind a $ref, which the fast path does
// not cover (and an embedded struct, which the direct decoder leaves to encoding/json):
// it measures the general path.
type benchWeatherRef struct{ benchWeather }

func (benchWeatherRef) Definition() tools.Definition {
	return tools.Definition{Name: "bench_weather_ref", Safe: true,
		Parameters: json.RawMessage(`{"$ref":"#/$defs/args","$defs":{"args":{"type":"object","properties":{
			"city":{"type":"string","minLength":1},
			"days":{"type":"integer","minimum":1,"maximum":14},
			"units":{"type":"string","enum":["metric","imperial"]}},
			"required":["city","days"],"additionalProperties":false}}}`)}
}

var benchWeatherArgs = []byte(`{"city":"Berlin","days":3,"units":"metric"}`)

// BenchmarkHydrate measures parse → validate → instantiate against a plain encoding/json
// decode of the same bytes, in the same run: over the BFCL ground-truth calls (decoded into
// map[string]any, the fair generic baseline) and for a typed three-field tool (decoded into
// its struct). The "ratio" sub-benchmarks interleave both over the same inputs and report
// hydrate/plain as x-plain.
func BenchmarkHydrate(b *testing.B) {
	d := loadBFCL(b)
	type job struct {
		reg  *tools.Registry
		tool string
		args []byte
	}
	var jobs []job
	for _, set := range d.sets {
		for _, c := range set.calls {
			if _, err := set.reg.Hydrate(c.tool, c.args); err == nil {
				jobs = append(jobs, job{set.reg, c.tool, c.args})
			}
		}
	}
	if len(jobs) == 0 {
		b.Fatal("no BFCL calls")
	}
	b.Run("bfcl", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			j := jobs[i%len(jobs)]
			if _, err := j.reg.Hydrate(j.tool, j.args); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("bfcl-plain-decode", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(jobs[i%len(jobs)].args, &m); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("bfcl-ratio", func(b *testing.B) {
		var hyd, plain time.Duration
		calls := 0
		for b.Loop() {
			t0 := time.Now()
			for _, j := range jobs {
				if _, err := j.reg.Hydrate(j.tool, j.args); err != nil {
					b.Fatal(err)
				}
			}
			t1 := time.Now()
			for _, j := range jobs {
				var m map[string]any
				if err := json.Unmarshal(j.args, &m); err != nil {
					b.Fatal(err)
				}
			}
			plain += time.Since(t1)
			hyd += t1.Sub(t0)
			calls += len(jobs)
		}
		b.ReportMetric(float64(hyd.Nanoseconds())/float64(calls), "hydrate-ns/call")
		b.ReportMetric(float64(plain.Nanoseconds())/float64(calls), "plain-ns/call")
		b.ReportMetric(float64(hyd)/float64(plain), "x-plain")
	})

	reg := tools.NewRegistry()
	tools.MustAdd[benchWeather](reg)
	b.Run("typed3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Hydrate("bench_weather", benchWeatherArgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	tools.MustAdd[benchWeatherRef](reg)
	b.Run("typed3-uncovered-schema", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Hydrate("bench_weather_ref", benchWeatherArgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed3-plain-decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w benchWeather
			if err := json.Unmarshal(benchWeatherArgs, &w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed3-ratio", func(b *testing.B) {
		const batch = 1000
		var hyd, plain time.Duration
		calls := 0
		for b.Loop() {
			t0 := time.Now()
			for range batch {
				if _, err := reg.Hydrate("bench_weather", benchWeatherArgs); err != nil {
					b.Fatal(err)
				}
			}
			t1 := time.Now()
			for range batch {
				var w benchWeather
				if err := json.Unmarshal(benchWeatherArgs, &w); err != nil {
					b.Fatal(err)
				}
			}
			plain += time.Since(t1)
			hyd += t1.Sub(t0)
			calls += batch
		}
		b.ReportMetric(float64(hyd.Nanoseconds())/float64(calls), "hydrate-ns/call")
		b.ReportMetric(float64(plain.Nanoseconds())/float64(calls), "plain-ns/call")
		b.ReportMetric(float64(hyd)/float64(plain), "x-plain")
	})
}
