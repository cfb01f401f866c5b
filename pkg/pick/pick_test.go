package pick

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func testCatalog(t *testing.T) *Catalog {
	t.Helper()
	weather := def("get_weather", "Current weather conditions for a city")
	weather.Parameters = []byte(`{"type":"object","properties":{"city":{"type":"string","description":"City name, e.g. Paris"},"units":{"enum":["celsius","fahrenheit"]}}}`)
	weather.Tags = []string{"weather", "public"}
	forecast := def("getForecast", "Seven day weather forecast")
	forecast.Capabilities = []string{"streaming"}
	email := def("send_email", "Send an email message to a recipient")
	email.Tags = []string{"messaging"}
	drop := def("drop_database", "Delete the whole database and every table in it")
	drop.Safe = false
	payroll := def("run_payroll", "Pay salaries to employees")
	payroll.Roles = []string{"finance"}
	cat, err := NewCatalog([]tools.Definition{weather, forecast, email, drop, payroll})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// In a small catalog a long request is scored on all its words: the bound on the
// postings a pick reads must not leave a tool the request names unscored.
func TestPickSmallCatalogLongRequest(t *testing.T) {
	t.Parallel()
	cat, err := NewCatalog([]tools.Definition{def("calculator", "Evaluate an arithmetic expression"),
		def("echo", "Return the input unchanged"), def("write_file", "Write text to a file in the sandbox")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Pick(t.Context(), "evaluate an arithmetic expression, return the value unchanged, and write it to a file", cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultNames(res); len(got) != 3 {
		t.Fatalf("results %v, want all three tools", got)
	}
}

func TestPickRanks(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	res, err := Pick(t.Context(), "What's the weather like in Paris?", cat, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || res[0].Name != "get_weather" {
		t.Fatalf("results %v, want get_weather first", resultNames(res))
	}
	for i, r := range res {
		if r.Score < DefaultMinScore || r.Score > 1 {
			t.Errorf("score %v outside [minScore, 1]", r.Score)
		}
		if i > 0 && r.Score > res[i-1].Score {
			t.Errorf("results not sorted by score: %v", res)
		}
		if r.Provenance == nil || r.Provenance.Scorer != "bm25" || r.Provenance.Details != nil {
			t.Errorf("provenance %+v, want scorer bm25 and no details without Debug", r.Provenance)
		}
	}
	if !strings.Contains(res[0].Reason, `"weather" in name`) {
		t.Errorf("reason %q does not say where weather matched", res[0].Reason)
	}
	if len(res) > DefaultMaxCandidates {
		t.Errorf("%d results, default max is %d", len(res), DefaultMaxCandidates)
	}
}

func TestPickDebugProvenance(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	res, err := Pick(t.Context(), "weather in a city, in fahrenheit, xyzzy", cat, Options{Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	ex, ok := res[0].Provenance.Details.(*BM25Details)
	if !ok {
		t.Fatalf("details %T, want *BM25Details", res[0].Provenance.Details)
	}
	fields := map[string]map[string]bool{}
	var sum float64
	for _, m := range ex.Terms {
		fields[m.Term] = map[string]bool{}
		var fs float64
		for _, f := range m.Fields {
			fields[m.Term][f.Field] = true
			fs += f.Score
		}
		if d := fs - m.Score; d > 1e-9 || d < -1e-9 {
			t.Errorf("term %s: field contributions sum to %v, term score %v", m.Term, fs, m.Score)
		}
		sum += m.Score
	}
	if !fields["weather"]["name"] || !fields["weather"]["description"] || !fields["weather"]["tags"] {
		t.Errorf("weather matched in %v, want name, description and tags", fields["weather"])
	}
	if !fields["citi"]["param_names"] || !fields["fahrenheit"]["param_text"] {
		t.Errorf("parameter matches missing: %v", fields)
	}
	if d := sum - ex.Raw; d > 1e-9 || d < -1e-9 {
		t.Errorf("terms sum to %v, raw is %v", sum, ex.Raw)
	}
	if d := ex.Raw/ex.Max - res[0].Score; d > 1e-6 || d < -1e-6 {
		t.Errorf("score %v is not raw/max %v", res[0].Score, ex.Raw/ex.Max)
	}
	if len(ex.Unknown) != 1 || ex.Unknown[0] != "xyzzi" {
		t.Errorf("unknown terms %v, want [xyzzi]", ex.Unknown)
	}
	b, err := json.Marshal(res[0])
	if err != nil || !strings.Contains(string(b), `"field":"param_names"`) {
		t.Errorf("result JSON %s (%v) lacks field provenance", b, err)
	}
}

func TestPickEdgeCases(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	ctx := t.Context()
	for _, in := range []any{nil, "", "   \n\t", json.RawMessage(`"  "`), []byte("null"), map[string]any{}} {
		if _, err := Pick(ctx, in, cat, Options{}); !errors.Is(err, ErrEmptyInput) {
			t.Errorf("input %#v: err %v, want ErrEmptyInput", in, err)
		}
	}
	t.Run("JSON input", func(t *testing.T) {
		res, err := Pick(ctx, map[string]any{"task": "send an email to Bob"}, cat, Options{})
		if err != nil || len(res) == 0 || res[0].Name != "send_email" {
			t.Fatalf("got %v, %v; want send_email first", resultNames(res), err)
		}
		res, err = Pick(ctx, json.RawMessage(`{"messages":[{"content":"email Bob"}]}`), cat, Options{})
		if err != nil || len(res) == 0 || res[0].Name != "send_email" {
			t.Fatalf("raw JSON: got %v, %v; want send_email first", resultNames(res), err)
		}
	})
	t.Run("empty catalog", func(t *testing.T) {
		empty, _ := NewCatalog(nil)
		res, err := Pick(ctx, "weather", empty, Options{})
		if err != nil || res == nil || len(res) != 0 {
			t.Fatalf("got %v, %v; want an empty, non-nil result", res, err)
		}
	})
	t.Run("nothing above minScore", func(t *testing.T) {
		res, err := Pick(ctx, "quantum chromodynamics", cat, Options{})
		if err != nil || len(res) != 0 {
			t.Fatalf("got %v, %v; want no result", resultNames(res), err)
		}
	})
	t.Run("huge input is cut", func(t *testing.T) {
		huge := "weather " + strings.Repeat("é", 1<<20) + " email"
		res, err := Pick(ctx, huge, cat, Options{Debug: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) == 0 || res[0].Name != "get_weather" || strings.Contains(fmt.Sprint(resultNames(res)), "send_email") {
			t.Fatalf("got %v; want get_weather first and no send_email (email lies past the cut)", resultNames(res))
		}
		p := res[0].Provenance
		if !p.InputTruncated || p.InputBytes != len(huge) {
			t.Errorf("provenance %+v does not report the cut of %d bytes", p, len(huge))
		}
	})
	t.Run("bad options", func(t *testing.T) {
		for _, o := range []Options{{MaxCandidates: -1}, {MaxCandidates: MaxCandidatesLimit + 1},
			{MinScore: new(1.5)}, {MinScore: new(-0.1)}, {Timeout: -1}, {MaxInputBytes: -5}} {
			if _, err := Pick(ctx, "weather", cat, o); !errors.Is(err, ErrInvalidOption) {
				t.Errorf("options %+v: err %v, want ErrInvalidOption", o, err)
			}
		}
	})
}

func TestPickFilters(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	all := Options{MaxCandidates: 10, MinScore: new(0.0)}
	pickNames := func(in string, o Options) []string {
		t.Helper()
		res, err := Pick(t.Context(), in, cat, o)
		if err != nil {
			t.Fatal(err)
		}
		return resultNames(res)
	}
	has := func(list []string, n string) bool {
		return strings.Contains(" "+strings.Join(list, " ")+" ", " "+n+" ")
	}

	if got := pickNames("delete the database", all); has(got, "drop_database") {
		t.Errorf("unsafe tool offered by default: %v", got)
	}
	withUnsafe := all
	withUnsafe.AllowUnsafe = true
	if got := pickNames("delete the database", withUnsafe); len(got) == 0 || got[0] != "drop_database" {
		t.Errorf("AllowUnsafe: got %v, want drop_database first", got)
	}
	if got := pickNames("pay employees salaries", all); has(got, "run_payroll") {
		t.Errorf("role-restricted tool offered to a caller without role: %v", got)
	}
	finance := all
	finance.Role = "finance"
	if got := pickNames("pay employees salaries", finance); len(got) == 0 || got[0] != "run_payroll" {
		t.Errorf("role finance: got %v, want run_payroll", got)
	}
	streaming := all
	streaming.Capabilities = []string{"Streaming"}
	if got := pickNames("weather forecast", streaming); fmt.Sprint(got) != "[getForecast]" {
		t.Errorf("capability streaming: got %v, want only getForecast", got)
	}
	incl := all
	incl.IncludeTags = []string{"WEATHER"}
	if got := pickNames("weather forecast email", incl); fmt.Sprint(got) != "[get_weather]" {
		t.Errorf("include tag weather: got %v", got)
	}
	excl := all
	excl.ExcludeTags = []string{"public"}
	if got := pickNames("weather forecast", excl); has(got, "get_weather") || !has(got, "getForecast") {
		t.Errorf("exclude tag public: got %v", got)
	}
	only := all
	only.Tools = []string{"send_email", "getForecast", "no_such_tool"}
	if got := pickNames("weather forecast email", only); fmt.Sprint(got) != "[getForecast send_email]" && fmt.Sprint(got) != "[send_email getForecast]" {
		t.Errorf("tools [send_email getForecast]: got %v", got)
	}
	one := all
	one.MaxCandidates = 1
	if got := pickNames("weather forecast email", one); len(got) != 1 {
		t.Errorf("MaxCandidates 1: got %v", got)
	}
}

// scorerFunc adapts a function to Scorer, for tests of custom scorers.
type scorerFunc struct {
	name string
	fn   func(ctx context.Context, req *Request) ([]Hit, error)
}

func (s scorerFunc) Name() string                                           { return s.name }
func (s scorerFunc) Score(ctx context.Context, req *Request) ([]Hit, error) { return s.fn(ctx, req) }

// A failing lexical scorer fails a hybrid pick; the semantic scorer running beside it
// has been stopped and has returned by then: nothing of a pick outlives it.
func TestHybridLexicalFailureStopsSemantic(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	var returned atomic.Bool
	sem := scorerFunc{"slow-embedding", func(ctx context.Context, _ *Request) ([]Hit, error) {
		<-ctx.Done() // an embedding service that answers only when asked to stop
		returned.Store(true)
		return nil, ctx.Err()
	}}
	boom := errors.New("index unreadable")
	lex := scorerFunc{"broken-lexical", func(context.Context, *Request) ([]Hit, error) { return nil, boom }}
	_, err := Pick(t.Context(), "weather", cat, Options{Scorer: &Hybrid{Lexical: lex, Semantic: sem}})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the lexical scorer's", err)
	}
	if !returned.Load() {
		t.Error("the pick returned while its semantic scorer still ran")
	}
}

func TestPickCustomScorers(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	ctx := t.Context()

	t.Run("a scorer error is reported", func(t *testing.T) {
		boom := errors.New("model unreachable")
		s := scorerFunc{"broken", func(context.Context, *Request) ([]Hit, error) { return nil, boom }}
		_, err := Pick(ctx, "weather", cat, Options{Scorer: s})
		if !errors.Is(err, ErrScorerFailed) || !errors.Is(err, boom) || !strings.Contains(err.Error(), "broken") {
			t.Fatalf("err = %v, want ErrScorerFailed naming the scorer and wrapping its error", err)
		}
	})
	t.Run("a hanging scorer falls back to registration order", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		s := scorerFunc{"hangs", func(context.Context, *Request) ([]Hit, error) { <-release; return nil, nil }}
		res, err := Pick(ctx, "weather", cat, Options{Scorer: s, Timeout: tools.Duration(20 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(resultNames(res)) != "[get_weather getForecast send_email]" {
			t.Fatalf("fallback %v, want the first three safe tools in registration order", resultNames(res))
		}
		for _, r := range res {
			if !r.Provenance.Fallback || r.Score != 0 || !strings.Contains(r.Reason, "20ms") {
				t.Errorf("fallback result %+v %+v does not say so", r, r.Provenance)
			}
		}
	})
	t.Run("a scorer honouring its context also falls back", func(t *testing.T) {
		s := scorerFunc{"slow", func(ctx context.Context, _ *Request) ([]Hit, error) { <-ctx.Done(); return nil, ctx.Err() }}
		res, err := Pick(ctx, "weather", cat, Options{Scorer: s, Timeout: tools.Duration(10 * time.Millisecond), AllowUnsafe: true, MaxCandidates: 10})
		if err != nil {
			t.Fatal(err)
		}
		// Filters still apply to a fallback: run_payroll needs a role the caller lacks.
		if fmt.Sprint(resultNames(res)) != "[get_weather getForecast send_email drop_database]" || !res[0].Provenance.Fallback {
			t.Fatalf("got %v, want the four tools allowed to the caller, as fallback", resultNames(res))
		}
	})
	t.Run("the caller's cancellation is an error, not a fallback", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		s := scorerFunc{"slow", func(ctx context.Context, _ *Request) ([]Hit, error) { <-ctx.Done(); return nil, ctx.Err() }}
		if _, err := Pick(cctx, "weather", cat, Options{Scorer: s, Timeout: tools.Duration(time.Second)}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("hits are checked: filtered tools, repeats, out of range scores", func(t *testing.T) {
		s := scorerFunc{"sloppy", func(_ context.Context, req *Request) ([]Hit, error) {
			drop, _ := req.Snapshot.Lookup("drop_database")
			email, _ := req.Snapshot.Lookup("send_email")
			weather, _ := req.Snapshot.Lookup("get_weather")
			return []Hit{{ID: email, Score: 0.5}, {ID: drop, Score: 1}, {ID: weather, Score: 7}, {ID: email, Score: 0.4}, {ID: 999, Score: 1}}, nil
		}}
		res, err := Pick(ctx, "anything", cat, Options{Scorer: s, MaxCandidates: 10})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(resultNames(res)) != "[get_weather send_email]" || res[0].Score != 1 {
			t.Fatalf("got %v (%v), want get_weather (clamped to 1) then send_email once", resultNames(res), res)
		}
	})
}

// TestPickDuringUpdates picks while a writer changes the catalog; run with -race.
func TestPickDuringUpdates(t *testing.T) {
	t.Parallel()
	cat := testCatalog(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := Pick(ctx, "weather email widget", cat, Options{MaxCandidates: 5})
				if err != nil {
					t.Error(err)
					return
				}
				if len(res) == 0 {
					t.Error("no result while the catalog changes")
					return
				}
			}
		})
	}
	for i := range 500 {
		name := fmt.Sprintf("widget_%d", i%50)
		if i%2 == 0 {
			if err := cat.Put(def(name, fmt.Sprintf("widget tool %d", i))); err != nil {
				t.Fatal(err)
			}
		} else {
			cat.Remove(name)
		}
	}
	close(stop)
	wg.Wait()
}

// A request that asks for two things in two sentences gets a tool for each: the tool
// for the short second sentence ranks above tools that match more of the long first
// one twice over, and its provenance gives its share of that sentence. Scored whole
// (Sentence 0), it does not make the top two.
func TestPickOneToolPerSentence(t *testing.T) {
	t.Parallel()
	cat, err := NewCatalog([]tools.Definition{
		def("getBloodCount", "Retrieve the blood count of a patient"),
		def("getCompleteBloodCount", "Retrieve the complete blood count test results of a patient"),
		def("getPatientRecord", "Retrieve the medical record of a patient"),
		def("translateText", "Translate text to another language"),
	})
	if err != nil {
		t.Fatal(err)
	}
	const req = "Retrieve the complete blood count test results of patient 42, with the blood count of each test. Translate the text."
	names := func(p BM25Params) []string {
		res, err := Pick(t.Context(), req, cat, Options{MaxCandidates: 2, Scorer: BM25{Params: p}, Debug: true})
		if err != nil {
			t.Fatal(err)
		}
		if d := res[len(res)-1].Provenance.Details.(*BM25Details); p.Sentence > 0 && res[len(res)-1].Name == "translateText" && !(d.Sentence > 3*d.Raw/d.Max) {
			t.Errorf("translateText's details %+v; want its share of its sentence, far above that of the request", d)
		}
		return resultNames(res)
	}
	whole := DefaultBM25Params()
	whole.Sentence = 0
	if got := names(whole); slices.Contains(got, "translateText") {
		t.Fatalf("scored whole: %v; the test wants a request whose second tool ranks low", got)
	}
	if got := names(DefaultBM25Params()); !slices.Equal(got, []string{"getCompleteBloodCount", "translateText"}) {
		t.Fatalf("by sentence: %v, want getCompleteBloodCount then translateText", got)
	}
}
