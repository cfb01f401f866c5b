package provider

import (
	"fmt"
	"os"
	"strings"
)

// New returns the model a spec names: "<provider>/<model>", where provider is openai,
// anthropic, ollama or scripted:
//
//	openai/gpt-4o-mini           Chat Completions (also vLLM, llama.cpp, LM Studio, Ollama /v1 with WithBaseURL)
//	anthropic/claude-sonnet-4-5  Messages API
//	ollama/llama3.1              Ollama's native /api/chat
//	scripted/testdata/demo.yaml  an offline script (the rest of the spec is a file path)
//	scripted/echo                the built-in [Echo] model: calls the tools a message names
//
// The model part may itself contain slashes ("openai/meta-llama/Llama-3.1-8B-Instruct").
// New reads no environment; see FromEnv.
func New(spec string, opts ...Option) (Model, error) {
	kind, rest, ok := strings.Cut(spec, "/")
	if !ok || rest == "" {
		return nil, fmt.Errorf("%w: model spec %q: want <provider>/<model>, e.g. openai/gpt-4o-mini, ollama/llama3.1 or scripted/<file>", ErrConfig, spec)
	}
	switch kind {
	case "openai":
		return NewOpenAI(rest, opts...)
	case "anthropic":
		return NewAnthropic(rest, opts...)
	case "ollama":
		return NewOllama(rest, opts...)
	case "scripted":
		if spec == EchoModelName {
			return NewEcho(), nil
		}
		return LoadScripted(rest)
	}
	return nil, fmt.Errorf("%w: model spec %q: unknown provider %q; want openai, anthropic, ollama or scripted", ErrConfig, spec, kind)
}

// FromEnv returns the model named by TOOLFLEET_MODEL (a spec as New reads it), with the
// provider's key and base URL from the environment:
//
//	openai     OPENAI_API_KEY, OPENAI_BASE_URL (e.g. http://localhost:8000/v1 for vLLM)
//	anthropic  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
//	ollama     OLLAMA_HOST (host:port or a URL), OLLAMA_API_KEY
//
// Options given here come after those from the environment, so they win. Without
// TOOLFLEET_MODEL it returns ErrNoModel, so that a caller can fall back to a script.
func FromEnv(opts ...Option) (Model, error) { return fromEnv(os.Getenv, opts) }

// FromSpec is FromEnv with spec in place of TOOLFLEET_MODEL (a -model flag): the
// provider's key and base URL still come from the environment. Its errors are New's.
func FromSpec(spec string, opts ...Option) (Model, error) {
	return New(spec, append(envOptions(spec, os.Getenv), opts...)...)
}

func fromEnv(getenv func(string) string, opts []Option) (Model, error) {
	spec := strings.TrimSpace(getenv("TOOLFLEET_MODEL"))
	if spec == "" {
		return nil, ErrNoModel
	}
	m, err := New(spec, append(envOptions(spec, getenv), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("TOOLFLEET_MODEL=%s: %w", spec, err)
	}
	return m, nil
}

// envOptions are the key and base URL of spec's provider, from the environment.
func envOptions(spec string, getenv func(string) string) []Option {
	switch kind, _, _ := strings.Cut(spec, "/"); kind {
	case "openai":
		return []Option{WithAPIKey(getenv("OPENAI_API_KEY")), WithBaseURL(getenv("OPENAI_BASE_URL"))}
	case "anthropic":
		return []Option{WithAPIKey(getenv("ANTHROPIC_API_KEY")), WithBaseURL(getenv("ANTHROPIC_BASE_URL"))}
	case "ollama":
		return []Option{WithAPIKey(getenv("OLLAMA_API_KEY")), WithBaseURL(ollamaHost(getenv("OLLAMA_HOST")))}
	}
	return nil
}

// ollamaHost reads OLLAMA_HOST as Ollama's own tools do: "host", "host:port" or a URL.
func ollamaHost(h string) string {
	h = strings.TrimSpace(h)
	if h == "" || strings.HasPrefix(h, "http://") || strings.HasPrefix(h, "https://") {
		return h
	}
	if !strings.Contains(h, ":") {
		h += ":11434"
	}
	if strings.HasPrefix(h, "0.0.0.0:") { // a bind address, not one to dial
		h = "127.0.0.1:" + strings.TrimPrefix(h, "0.0.0.0:")
	}
	return "http://" + h
}
