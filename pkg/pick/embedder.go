package pick

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Embedder turns texts into vectors, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// OpenAIEmbedder calls an OpenAI-compatible embeddings endpoint: POST {BaseURL}/v1/embeddings
// with {"model", "input": [...]}, answered by {"data": [{"embedding": [...], "index": i}],
// "usage": {...}}. OpenAI, Ollama, vLLM, llama.cpp and LiteLLM all speak it.
type OpenAIEmbedder struct {
	// BaseURL is the server root, e.g. https://api.openai.com or http://localhost:11434;
	// a trailing /v1 is accepted too.
	BaseURL string
	Model   string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Client defaults to http.DefaultClient; the pick's context bounds each request.
	Client *http.Client
	// BatchSize is how many texts go in one request. 0 means 64.
	BatchSize int
}

type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingsResponse struct {
	Data []struct {
		Embedding []float32 `json:"embedding"`
		Index     int       `json:"index"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// Embed returns the embeddings of texts, batching requests.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	n := e.BatchSize
	if n <= 0 {
		n = 64
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += n {
		vecs, err := e.embedBatch(ctx, texts[start:min(start+n, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *OpenAIEmbedder) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: e.Model, Input: texts})
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(strings.TrimSuffix(e.BaseURL, "/"), "/v1") + "/v1/embeddings"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.APIKey)
	}
	client := e.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("embeddings: read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var ae apiError
		if json.Unmarshal(raw, &ae) == nil && ae.Error.Message != "" {
			return nil, fmt.Errorf("embeddings: %s: %s (%s)", resp.Status, ae.Error.Message, ae.Error.Type)
		}
		return nil, fmt.Errorf("embeddings: %s: %.200s", resp.Status, raw)
	}
	var er embeddingsResponse
	if err := json.Unmarshal(raw, &er); err != nil {
		return nil, fmt.Errorf("embeddings: malformed response: %w", err)
	}
	if len(er.Data) != len(texts) {
		return nil, fmt.Errorf("embeddings: %d vectors for %d inputs", len(er.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range er.Data { // the index field, not the order, says which input a vector is for
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings: bad or repeated index %d", d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, errors.New("embeddings: empty vector")
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}
