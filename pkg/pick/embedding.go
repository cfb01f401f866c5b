package pick

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/rs/zerolog"
)

// Embedding scores tools by the cosine similarity of their embedding with the input's.
// A tool's text (name split into words, description, tags, parameter names and text) is
// embedded once per definition: vectors are kept in memory by definition hash and, with a
// Store, in a JetStream KV bucket that replicas share, so a replica that starts later
// embeds nothing the fleet has embedded before. A pick costs one embedding call (the
// input) plus a dot product per candidate tool.
//
// Scores are max(0, cosine): 0..1, with no normalisation by other tools. Cosine levels
// differ between models (many put unrelated texts at 0.2–0.4 already), so set MinScore to
// suit the model.
type Embedding struct {
	Embedder Embedder
	// Model names the model in cache keys and provenance; vectors of different models
	// never mix.
	Model string
	// Store, when set, shares vectors between replicas (see [KVVectorStore]).
	Store VectorStore
	// Log receives cache failures, which never fail a pick (the vector is embedded again).
	Log zerolog.Logger

	mem memVectors
}

// NewEmbedding returns an embedding scorer for model.
func NewEmbedding(e Embedder, model string, store VectorStore, log zerolog.Logger) *Embedding {
	return &Embedding{Embedder: e, Model: model, Store: store, Log: log}
}

// Name returns "embedding".
func (*Embedding) Name() string { return "embedding" }

// EmbeddingDetails is the provenance of an embedding score.
type EmbeddingDetails struct {
	Model  string  `json:"model"`
	Cosine float64 `json:"cosine"`
}

// Score ranks the allowed tools by cosine similarity.
func (e *Embedding) Score(ctx context.Context, req *Request) ([]Hit, error) {
	q, err := e.Embedder.Embed(ctx, []string{req.Text})
	if err != nil {
		return nil, err
	}
	if len(q) != 1 {
		return nil, fmt.Errorf("embeddings: %d vectors for one input", len(q))
	}
	qv := unit(q[0])
	s := req.Snapshot
	var ids []DocID
	for id := range req.Candidates() {
		ids = append(ids, id)
	}
	vecs, err := e.vectors(ctx, s, ids)
	if err != nil {
		return nil, err
	}
	var top topK
	top.reset(req.Limit)
	for i, id := range ids {
		if len(vecs[i]) != len(qv) {
			return nil, fmt.Errorf("embeddings: tool %s has %d dimensions, the input %d (model changed?)",
				s.docs[id].def.Name, len(vecs[i]), len(qv))
		}
		top.push(ranked{score: dot(qv, vecs[i]), key: s.docs[id].seq, id: id})
	}
	rs := top.sorted(nil)
	hits := make([]Hit, len(rs))
	for i, r := range rs {
		hits[i] = Hit{ID: r.id, Score: max(r.score, 0),
			Reason: fmt.Sprintf("cosine similarity %.3f (%s)", r.score, e.Model)}
		if req.Debug {
			hits[i].Details = &EmbeddingDetails{Model: e.Model, Cosine: r.score}
		}
	}
	return hits, nil
}

// Warm embeds every tool of s that has no vector yet, so that picks do not pay for it,
// and forgets the vectors of tools no longer in s.
func (e *Embedding) Warm(ctx context.Context, s *Snapshot) error {
	ids := s.inOrder()
	if _, err := e.vectors(ctx, s, ids); err != nil {
		return err
	}
	keep := make(map[string][]float32, len(ids))
	e.mem.mu.Lock()
	defer e.mem.mu.Unlock()
	for _, id := range ids {
		if v, ok := e.mem.m[s.docs[id].hash]; ok {
			keep[s.docs[id].hash] = v
		}
	}
	e.mem.m = keep
	return nil
}

// vectors returns the unit vectors of ids: from memory, else the store, else the model.
func (e *Embedding) vectors(ctx context.Context, s *Snapshot, ids []DocID) ([][]float32, error) {
	out := make([][]float32, len(ids))
	var missing []int
	for i, id := range ids {
		if v := e.mem.get(s.docs[id].hash); v != nil {
			out[i] = v
			continue
		}
		missing = append(missing, i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	var texts []string
	var need []int
	for _, i := range missing {
		h := s.docs[ids[i]].hash
		if e.Store != nil {
			v, err := e.Store.Get(ctx, e.storeKey(h))
			if err != nil {
				e.Log.Warn().Err(err).Str("tool", s.docs[ids[i]].def.Name).Msg("embedding cache read failed")
			}
			if v != nil {
				out[i] = unit(v)
				e.mem.put(h, out[i])
				continue
			}
		}
		texts = append(texts, toolText(s.docs[ids[i]]))
		need = append(need, i)
	}
	if len(texts) == 0 {
		return out, nil
	}
	vecs, err := e.Embedder.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("embeddings: %d vectors for %d tools", len(vecs), len(texts))
	}
	for j, i := range need {
		h := s.docs[ids[i]].hash
		out[i] = unit(vecs[j])
		e.mem.put(h, out[i])
		if e.Store != nil {
			if err := e.Store.Put(ctx, e.storeKey(h), vecs[j]); err != nil {
				e.Log.Warn().Err(err).Str("tool", s.docs[ids[i]].def.Name).Msg("embedding cache write failed")
			}
		}
	}
	return out, nil
}

// storeKey is a KV key for a definition hash under this model: the model name may hold
// characters KV keys do not allow, so it is hashed.
func (e *Embedding) storeKey(defHash string) string {
	m := sha256.Sum256([]byte(e.Model))
	return hex.EncodeToString(m[:8]) + "." + defHash
}

// toolText is what is embedded for a tool: its name as words, description, tags and
// parameter text, one part a line.
func toolText(d *doc) string {
	t := fieldTexts(d.def)
	var words []string
	splitWords(d.def.Name, func(w []byte) { words = append(words, string(w)) })
	parts := []string{strings.Join(words, " ")}
	for _, f := range []Field{FieldDescription, FieldTags, FieldParamNames, FieldParamText} {
		if len(t[f]) > 0 {
			parts = append(parts, strings.Join(t[f], ", "))
		}
	}
	return strings.Join(parts, "\n")
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	inv := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

func dot(a, b []float32) float64 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return float64(s)
}
