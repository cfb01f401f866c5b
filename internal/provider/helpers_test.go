package provider_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/providertest"
)

// newAt makes a Harness.New of a client's constructor: the model the suite wants, at
// the test server's url followed by path.
func newAt[M provider.Model](newClient func(string, ...provider.Option) (M, error), path string) func(string, ...provider.Option) (provider.Model, error) {
	return func(url string, opts ...provider.Option) (provider.Model, error) {
		m, err := newClient(providertest.WantModel, append([]provider.Option{provider.WithBaseURL(url + path)}, opts...)...)
		return m, err
	}
}

// jsonObject decodes b into a generic value, failing the test when it is not JSON.
func jsonObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return v
}

// sameJSON fails the test unless got and want hold the same JSON value.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("request body differs\n got: %s\nwant: %s", gi, wi)
	}
}

// str reads a string field, failing the test when it has another type.
func str(t *testing.T, v any, what string) string {
	t.Helper()
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		t.Errorf("%s is %T, want a string", what, v)
	}
	return s
}

func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func readAll(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func jsonResponse(body string) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body))}
}

// stdRequest is the conformance suite's request, without a tool choice.
func stdRequest() provider.Request {
	temp := 0.2
	return provider.Request{System: providertest.System, Messages: providertest.Conversation(),
		Tools: providertest.Tools(), MaxTokens: 256, Temperature: &temp}
}
