package pick

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// openAIReferenceResponse is the example response of POST /v1/embeddings in OpenAI's API
// reference, with the vector cut to the values the reference shows.
const openAIReferenceResponse = `{
  "object": "list",
  "data": [
    {
      "object": "embedding",
      "embedding": [
        0.0023064255,
        -0.009327292,
        -0.0028842222
      ],
      "index": 0
    }
  ],
  "model": "text-embedding-ada-002",
  "usage": {
    "prompt_tokens": 8,
    "total_tokens": 8
  }
}`

func TestOpenAIEmbedderWireFormat(t *testing.T) {
	t.Parallel()
	var got struct {
		method, path, auth, ctype string
		body                      map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.method, got.path, got.auth, got.ctype = r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type")
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got.body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, openAIReferenceResponse)
	}))
	defer srv.Close()
	e := &OpenAIEmbedder{BaseURL: srv.URL + "/v1/", Model: "text-embedding-ada-002", APIKey: "sk-test"}
	vecs, err := e.Embed(t.Context(), []string{"The food was delicious and the waiter..."})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 1 || len(vecs[0]) != 3 || vecs[0][1] != -0.009327292 {
		t.Fatalf("vectors %v", vecs)
	}
	if got.method != "POST" || got.path != "/v1/embeddings" || got.auth != "Bearer sk-test" || got.ctype != "application/json" {
		t.Errorf("request %s %s auth %q type %q", got.method, got.path, got.auth, got.ctype)
	}
	if got.body["model"] != "text-embedding-ada-002" || fmt.Sprint(got.body["input"]) != "[The food was delicious and the waiter...]" {
		t.Errorf("request body %v", got.body)
	}
}

func TestOpenAIEmbedderErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, status, body, want string
	}{
		{"API error", "401", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`, "Incorrect API key provided"},
		{"not JSON", "200", `<html>`, "malformed response"},
		{"too few vectors", "200", `{"data":[],"usage":{}}`, "0 vectors for 1 inputs"},
		{"bad index", "200", `{"data":[{"embedding":[1],"index":3}]}`, "bad or repeated index 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				code := 200
				fmt.Sscan(c.status, &code)
				w.WriteHeader(code)
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			_, err := (&OpenAIEmbedder{BaseURL: srv.URL, Model: "m"}).Embed(t.Context(), []string{"x"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want it to say %q", err, c.want)
			}
		})
	}
}

// conceptServer is an embeddings endpoint speaking the OpenAI wire format whose vectors
// put synonyms on one axis, so that semantic matches without shared words can be tested.
// It answers batches in reverse order (clients must use the index field) and counts the
// texts it embeds.
type conceptServer struct {
	*httptest.Server
	mu     sync.Mutex
	inputs []string
	fail   atomic.Bool
}

var concepts = [][]string{
	{"car", "automobile", "vehicle", "cars"},
	{"rent", "rental", "hire", "lease"},
	{"weather", "forecast", "temperature", "rain"},
	{"email", "mail", "message", "send"},
	{"money", "payment", "pay", "invoice", "salary", "salaries"},
}

func newConceptServer(t *testing.T) *conceptServer {
	cs := &conceptServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cs.fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"model overloaded","type":"server_error"}}`)
			return
		}
		var req embeddingsRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/embeddings" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		cs.mu.Lock()
		cs.inputs = append(cs.inputs, req.Input...)
		cs.mu.Unlock()
		type item struct {
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
			Index     int       `json:"index"`
		}
		resp := struct {
			Object string         `json:"object"`
			Data   []item         `json:"data"`
			Model  string         `json:"model"`
			Usage  map[string]int `json:"usage"`
		}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)}}
		for i := len(req.Input) - 1; i >= 0; i-- {
			resp.Data = append(resp.Data, item{"embedding", conceptVector(req.Input[i]), i})
		}
		json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *conceptServer) embedded() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]string(nil), cs.inputs...)
}

func conceptVector(text string) []float32 {
	v := make([]float32, 32)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !('a' <= r && r <= 'z') }) {
		found := false
		for i, g := range concepts {
			for _, c := range g {
				if c == w {
					v[i] += 3
					found = true
				}
			}
		}
		if !found {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[len(concepts)+int(h.Sum32()%uint32(len(v)-len(concepts)))] += 0.3
		}
	}
	return v
}

func semanticCatalog(t *testing.T) *Catalog {
	cat, err := NewCatalog([]tools.Definition{
		def("rent_car", "Book an automobile from a rental agency"),
		def("get_weather", "Current weather for a city"),
		def("send_email", "Send a mail"),
		def("run_payroll", "Pay salaries"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestEmbeddingScorer(t *testing.T) {
	t.Parallel()
	cs := newConceptServer(t)
	cat := semanticCatalog(t)
	emb := NewEmbedding(&OpenAIEmbedder{BaseURL: cs.URL, Model: "concepts"}, "concepts", nil, zerolog.Nop())
	ctx := t.Context()

	// No word in common with rent_car: BM25 finds nothing, embeddings do.
	bm, err := Pick(ctx, "hire a vehicle", cat, Options{})
	if err != nil || len(bm) != 0 {
		t.Fatalf("bm25 got %v, %v; the test needs a query without shared words", resultNames(bm), err)
	}
	res, err := Pick(ctx, "hire a vehicle", cat, Options{Scorer: emb, Debug: true, MinScore: new(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != "rent_car" {
		t.Fatalf("got %v, want rent_car alone above 0.5", resultNames(res))
	}
	d, ok := res[0].Provenance.Details.(*EmbeddingDetails)
	if !ok || d.Model != "concepts" || d.Cosine < 0.5 || res[0].Provenance.Scorer != "embedding" {
		t.Errorf("provenance %+v details %+v", res[0].Provenance, res[0].Provenance.Details)
	}
	if n := len(cs.embedded()); n != 5 {
		t.Errorf("embedded %d texts, want 4 tools + 1 query", n)
	}
	// Tool vectors are cached: a second pick embeds the query only.
	if _, err := Pick(ctx, "what is the temperature", cat, Options{Scorer: emb}); err != nil {
		t.Fatal(err)
	}
	if n := len(cs.embedded()); n != 6 {
		t.Errorf("embedded %d texts after a second pick, want 6 (cached tools)", n)
	}
	// A changed tool is embedded again, the others are not.
	if err := cat.Put(def("send_email", "Send an email message")); err != nil {
		t.Fatal(err)
	}
	if _, err := Pick(ctx, "mail Bob", cat, Options{Scorer: emb}); err != nil {
		t.Fatal(err)
	}
	in := cs.embedded()
	if len(in) != 8 || !strings.Contains(strings.Join(in[6:], "|"), "Send an email message") {
		t.Errorf("after a change embedded %q, want the changed tool and the query", in[6:])
	}
	// Endpoint down: a clear error naming the scorer.
	cs.fail.Store(true)
	_, err = Pick(ctx, "weather", cat, Options{Scorer: emb})
	if !errors.Is(err, ErrScorerFailed) || !strings.Contains(err.Error(), "model overloaded") {
		t.Fatalf("err = %v", err)
	}
}

func TestHybridScorer(t *testing.T) {
	t.Parallel()
	cs := newConceptServer(t)
	cat := semanticCatalog(t)
	emb := NewEmbedding(&OpenAIEmbedder{BaseURL: cs.URL, Model: "concepts"}, "concepts", nil, zerolog.Nop())
	ctx := t.Context()
	all := Options{MaxCandidates: 4, MinScore: new(0.0), Debug: true}

	for _, mode := range []FusionMode{FuseRRF, FuseWeighted} {
		o := all
		o.Scorer = &Hybrid{Semantic: emb, Mode: mode}
		// "car rental weather": BM25 sees weather (shared word); embeddings see both.
		res, err := Pick(ctx, "automobile hire and the weather", cat, o)
		if err != nil {
			t.Fatal(err)
		}
		top2 := fmt.Sprint(resultNames(res)[:2])
		if top2 != "[get_weather rent_car]" && top2 != "[rent_car get_weather]" {
			t.Errorf("mode %d: got %v, want rent_car and get_weather on top", mode, resultNames(res))
		}
		for _, r := range res {
			if r.Score < 0 || r.Score > 1 {
				t.Errorf("mode %d: score %v out of 0..1", mode, r.Score)
			}
		}
		d := res[0].Provenance.Details.(*HybridDetails)
		if d.SemanticRank != 1 && d.LexicalRank != 1 {
			t.Errorf("mode %d: top result ranks %+v", mode, d)
		}
	}
	// A hybrid without its semantic half is a configuration error, reported as such.
	bad := all
	bad.Scorer = &Hybrid{}
	if _, err := Pick(ctx, "weather", cat, bad); !errors.Is(err, ErrScorerFailed) || !strings.Contains(err.Error(), "no semantic scorer") {
		t.Errorf("hybrid without semantic scorer: err %v", err)
	}
	// RRF: a tool first in both rankings scores exactly 1.
	o := all
	o.Scorer = &Hybrid{Semantic: emb}
	res, err := Pick(ctx, "weather forecast", cat, o)
	if err != nil || res[0].Name != "get_weather" || res[0].Score != 1 {
		t.Fatalf("got %v %v (%v), want get_weather with score 1", resultNames(res), res, err)
	}
	// Semantic side down: BM25 alone, and the reason says so.
	cs.fail.Store(true)
	res, err = Pick(ctx, "weather forecast", cat, o)
	if err != nil || len(res) == 0 || res[0].Name != "get_weather" || !strings.Contains(res[0].Reason, "embedding failed") {
		t.Fatalf("got %v (%v); want get_weather by bm25 alone with a reason", res, err)
	}
}

// TestEmbeddingSharedCache shows that replicas share tool vectors through JetStream KV:
// a second scorer with an empty memory embeds only the query.
func TestEmbeddingSharedCache(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	store, err := NewKVVectorStore(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	cs := newConceptServer(t)
	cat := semanticCatalog(t)
	newScorer := func() *Embedding {
		return NewEmbedding(&OpenAIEmbedder{BaseURL: cs.URL, Model: "concepts"}, "concepts", store, zerolog.Nop())
	}
	first := newScorer()
	if err := first.Warm(ctx, cat.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if n := len(cs.embedded()); n != 4 {
		t.Fatalf("warm embedded %d texts, want 4", n)
	}
	kv, err := js.KeyValue(ctx, EmbeddingsBucket)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := cat.Snapshot().Lookup("rent_car")
	e, err := kv.Get(ctx, first.storeKey(cat.Snapshot().Hash(id)))
	if err != nil || len(e.Value()) != 4*32 {
		t.Fatalf("KV entry for rent_car: %v, %v", e, err)
	}

	second := newScorer() // another replica: empty memory, same bucket
	res, err := Pick(ctx, "hire a vehicle", cat, Options{Scorer: second})
	if err != nil || len(res) == 0 || res[0].Name != "rent_car" {
		t.Fatalf("second replica got %v, %v", resultNames(res), err)
	}
	if in := cs.embedded(); len(in) != 5 || in[4] != "hire a vehicle" {
		t.Errorf("second replica embedded %q, want only the query", in[4:])
	}
	// Another model never reads these vectors.
	other := NewEmbedding(&OpenAIEmbedder{BaseURL: cs.URL, Model: "other"}, "other", store, zerolog.Nop())
	if _, err := Pick(ctx, "hire a vehicle", cat, Options{Scorer: other}); err != nil {
		t.Fatal(err)
	}
	if n := len(cs.embedded()); n != 10 {
		t.Errorf("other model embedded %d texts in all, want 10 (4 tools + query again)", n)
	}
}
