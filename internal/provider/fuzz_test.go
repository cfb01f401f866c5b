package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/providertest"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A model server's answer is outside input. These fuzzers hand each client arbitrary
// bytes as a successful answer, whole (Generate) or streamed (Stream), through an
// in-memory transport, and hold it to one contract: no panic; either an error the
// planner can classify (ErrMalformedResponse or an *APIError) or a response whose every
// tool call has an id, a name and arguments Hydrate reads (an object, or a JSON string),
// and, when streamed, whose calls are the ones the deltas announced.

// bodyTransport answers every request with status 200 and body.
type bodyTransport struct {
	body        []byte
	contentType string
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {b.contentType}},
		Body: io.NopCloser(bytes.NewReader(b.body)), Request: r}, nil
}

func fuzzClient(f *testing.F, h providertest.Harness, seeds ...providertest.Reply) {
	for _, r := range append(seeds, h.Text, h.ToolCalls, h.StreamText, h.StreamToolCalls, h.StreamError) {
		f.Add([]byte(r.Body), false)
		f.Add([]byte(r.Body), true)
		if n := len(r.Body); n > 0 { // cut off mid-answer
			f.Add([]byte(r.Body[:n/2]), false)
			f.Add([]byte(r.Body[:n/2]), true)
		}
	}
	for _, s := range []string{``, `{}`, `[]`, `null`, "data: [DONE]\n\n", "data: {}\n\n", "{\"done\":true}\n"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	req := provider.Request{Messages: []provider.Message{{Role: provider.RoleUser, Text: "hi"}},
		Tools: []tools.Definition{{Name: "search", Description: "Search.", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		ct := "application/json"
		if stream {
			ct = "text/event-stream"
		}
		m, err := h.New("http://model.invalid", provider.WithHTTPClient(&http.Client{Transport: bodyTransport{body, ct}}))
		if err != nil {
			t.Fatal(err)
		}
		var (
			resp      *provider.Response
			announced []provider.ToolCall
		)
		if stream {
			resp, err = m.Stream(context.Background(), req, func(d provider.Delta) {
				if d.ToolCall != nil {
					announced = append(announced, *d.ToolCall)
				}
			})
		} else {
			resp, err = m.Generate(context.Background(), req)
		}
		if err != nil {
			var apiErr *provider.APIError
			if !errors.Is(err, provider.ErrMalformedResponse) && !errors.As(err, &apiErr) {
				t.Fatalf("%q (stream %v): error %T %v is neither ErrMalformedResponse nor an *APIError", body, stream, err, err)
			}
			if resp != nil {
				t.Fatalf("%q (stream %v): both a response and an error", body, stream)
			}
			return
		}
		if resp == nil || resp.StopReason == "" {
			t.Fatalf("%q (stream %v): response %+v without a stop reason", body, stream, resp)
		}
		for i, c := range resp.Message.ToolCalls {
			args := strings.TrimSpace(string(c.Arguments))
			if c.ID == "" || c.Name == "" || !json.Valid(c.Arguments) || (args[0] != '{' && args[0] != '"') {
				t.Fatalf("%q (stream %v): tool call %d is %+v; want an id, a name and arguments that are an object or a JSON string",
					body, stream, i, c)
			}
		}
		if stream && !reflect.DeepEqual(announced, resp.Message.ToolCalls) && (len(announced) > 0 || len(resp.Message.ToolCalls) > 0) {
			t.Fatalf("%q: deltas announced calls %+v, the response has %+v", body, announced, resp.Message.ToolCalls)
		}
	})
}

func FuzzOpenAIResponse(f *testing.F) { fuzzClient(f, openAIHarness) }

func FuzzAnthropicResponse(f *testing.F) { fuzzClient(f, anthropicHarness) }

func FuzzOllamaResponse(f *testing.F) { fuzzClient(f, ollamaHarness) }
