package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/provider"
)

// Run runs the conformance suite against the client h describes.
func Run(t *testing.T, h Harness) {
	t.Run("SendsConversation", h.testSendsConversation)
	t.Run("GenerateText", h.testGenerateText)
	t.Run("GenerateToolCalls", h.testGenerateToolCalls)
	t.Run("ToolChoice", h.testToolChoice)
	t.Run("ToolChoiceNamingAnAbsentTool", h.testToolChoiceAbsent)
	t.Run("StreamText", h.testStreamText)
	t.Run("StreamToolCalls", h.testStreamToolCalls)
	t.Run("StreamErrorEvent", h.testStreamError)
	t.Run("StreamCutShort", h.testStreamCutShort)
	t.Run("RateLimitedRetryAfterSeconds", h.testRetryAfterSeconds)
	t.Run("RateLimitedRetryAfterDate", h.testRetryAfterDate)
	t.Run("RateLimitedLongerThanMaxWait", h.testRetryAfterTooLong)
	t.Run("ServerErrorThenSuccess", h.testServerErrorThenSuccess)
	t.Run("ServerErrorAttemptsBounded", h.testAttemptsBounded)
	t.Run("BadRequestNotRetried", h.testBadRequest)
	t.Run("MalformedBody", h.testMalformed)
	t.Run("ContextCanceledInFlight", h.testCancelInFlight)
	t.Run("ContextCanceledWhileWaitingToRetry", h.testCancelWhileWaiting)
}

func (h Harness) testSendsConversation(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.Text)
	if _, err := b.model.Generate(context.Background(), request()); err != nil {
		t.Fatalf("generate: %v", err)
	}
	b.f.mu.Lock()
	path, hdr := b.f.paths[0], b.f.headers[0]
	b.f.mu.Unlock()
	if path != "POST "+h.Path {
		t.Errorf("request went to %q, want POST %s", path, h.Path)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	h.CheckHeaders(t, hdr)
	sent := h.Decode(t, b.f.lastBody())
	if sent.Model != WantModel {
		t.Errorf("model = %q, want %q", sent.Model, WantModel)
	}
	if sent.System != System {
		t.Errorf("system = %q, want %q", sent.System, System)
	}
	if sent.Stream {
		t.Errorf("Generate asked for a stream")
	}
	if sent.MaxTokens != 256 {
		t.Errorf("max tokens = %d, want 256", sent.MaxTokens)
	}
	if sent.Temperature == nil || *sent.Temperature != 0.2 {
		t.Errorf("temperature = %v, want 0.2", sent.Temperature)
	}
	checkTools(t, sent.Tools, []string{"get_weather", "get_time"})
	if h.Features.NativeToolChoice && sent.ToolChoice != "auto" {
		t.Errorf("tool choice = %q, want auto", sent.ToolChoice)
	}
	h.checkMessages(t, sent.Messages, Conversation())
}

// checkTools compares the tools sent with the suite's, schema by schema.
func checkTools(t *testing.T, sent []SentTool, names []string) {
	t.Helper()
	defs := map[string]json.RawMessage{}
	descs := map[string]string{}
	for _, d := range Tools() {
		defs[d.Name], descs[d.Name] = d.Parameters, d.Description
	}
	var got []string
	for _, s := range sent {
		got = append(got, s.Name)
		if !SameArguments(s.Parameters, defs[s.Name]) {
			t.Errorf("tool %s: schema sent %s, want %s", s.Name, s.Parameters, defs[s.Name])
		}
		if s.Description != descs[s.Name] {
			t.Errorf("tool %s: description %q, want %q", s.Name, s.Description, descs[s.Name])
		}
	}
	if !reflect.DeepEqual(got, names) {
		t.Errorf("tools sent = %v, want %v", got, names)
	}
}

// checkMessages compares a decoded conversation with the one sent, as far as the
// provider's format carries it.
func (h Harness) checkMessages(t *testing.T, got, want []provider.Message) {
	t.Helper()
	got = mergeToolMessages(got)
	if len(got) != len(want) {
		t.Fatalf("sent %d messages, want %d:\n%s", len(got), len(want), dump(got))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Role != w.Role || g.Text != w.Text {
			t.Errorf("message %d = %s %q, want %s %q", i, g.Role, g.Text, w.Role, w.Text)
		}
		if len(g.ToolCalls) != len(w.ToolCalls) {
			t.Errorf("message %d has %d tool calls, want %d", i, len(g.ToolCalls), len(w.ToolCalls))
			continue
		}
		for j := range w.ToolCalls {
			gc, wc := g.ToolCalls[j], w.ToolCalls[j]
			if gc.Name != wc.Name || !SameArguments(gc.Arguments, wc.Arguments) {
				t.Errorf("message %d call %d = %s %s, want %s %s", i, j, gc.Name, gc.Arguments, wc.Name, wc.Arguments)
			}
			if h.Features.CallIDs && gc.ID != wc.ID {
				t.Errorf("message %d call %d id = %q, want %q", i, j, gc.ID, wc.ID)
			}
		}
		if len(g.ToolResults) != len(w.ToolResults) {
			t.Errorf("message %d has %d tool results, want %d", i, len(g.ToolResults), len(w.ToolResults))
			continue
		}
		for j := range w.ToolResults {
			gr, wr := g.ToolResults[j], w.ToolResults[j]
			if Text(gr.Content) != Text(wr.Content) {
				t.Errorf("message %d result %d content = %s, want %s", i, j, Text(gr.Content), Text(wr.Content))
			}
			if h.Features.CallIDs && gr.CallID != wr.CallID {
				t.Errorf("message %d result %d answers %q, want %q", i, j, gr.CallID, wr.CallID)
			}
			if h.Features.ResultNames && gr.Name != wr.Name {
				t.Errorf("message %d result %d names %q, want %q", i, j, gr.Name, wr.Name)
			}
			if h.Features.ErrorFlag && gr.IsError != wr.IsError {
				t.Errorf("message %d result %d error flag = %v, want %v", i, j, gr.IsError, wr.IsError)
			}
		}
	}
}

func mergeToolMessages(msgs []provider.Message) []provider.Message {
	var out []provider.Message
	for _, m := range msgs {
		if m.Role == provider.RoleTool && len(out) > 0 && out[len(out)-1].Role == provider.RoleTool {
			out[len(out)-1].ToolResults = append(out[len(out)-1].ToolResults, m.ToolResults...)
			continue
		}
		out = append(out, m)
	}
	return out
}

// dump is v as indented JSON for a failure's message, or as Go prints it when it does
// not marshal.
func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%+v (%v)", v, err)
	}
	return string(b)
}

func (h Harness) testGenerateText(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.Text)
	resp, err := b.model.Generate(context.Background(), request())
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	checkTextResponse(t, h, resp)
}

func checkTextResponse(t *testing.T, h Harness, resp *provider.Response) {
	t.Helper()
	if resp.Message.Role != provider.RoleAssistant || resp.Message.Text != WantText {
		t.Errorf("message = %s %q, want assistant %q", resp.Message.Role, resp.Message.Text, WantText)
	}
	if len(resp.Message.ToolCalls) != 0 {
		t.Errorf("unexpected tool calls: %v", resp.Message.ToolCalls)
	}
	if resp.StopReason != provider.StopEnd {
		t.Errorf("stop reason = %q (%q), want %q", resp.StopReason, resp.RawStopReason, provider.StopEnd)
	}
	if resp.Usage != WantTextUsage {
		t.Errorf("usage = %+v, want %+v", resp.Usage, WantTextUsage)
	}
	if resp.Provider != h.Name || resp.Model == "" {
		t.Errorf("provider/model = %q/%q, want %q and the fixture's model", resp.Provider, resp.Model, h.Name)
	}
}

func (h Harness) testGenerateToolCalls(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.ToolCalls)
	resp, err := b.model.Generate(context.Background(), request())
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	checkCallsResponse(t, resp)
}

func checkCallsResponse(t *testing.T, resp *provider.Response) {
	t.Helper()
	calls := resp.Message.ToolCalls
	if len(calls) != len(WantCalls) {
		t.Fatalf("got %d tool calls, want %d: %s", len(calls), len(WantCalls), dump(calls))
	}
	ids := map[string]bool{}
	for i, w := range WantCalls {
		if calls[i].Name != w.Name || !SameArguments(calls[i].Arguments, w.Arguments) {
			t.Errorf("call %d = %s %s, want %s %s", i, calls[i].Name, calls[i].Arguments, w.Name, w.Arguments)
		}
		if calls[i].ID == "" || ids[calls[i].ID] {
			t.Errorf("call %d id %q is empty or repeated", i, calls[i].ID)
		}
		ids[calls[i].ID] = true
	}
	if resp.StopReason != provider.StopToolCalls {
		t.Errorf("stop reason = %q (%q), want %q", resp.StopReason, resp.RawStopReason, provider.StopToolCalls)
	}
	if resp.Usage != WantCallsUsage {
		t.Errorf("usage = %+v, want %+v", resp.Usage, WantCallsUsage)
	}
}

func (h Harness) testToolChoice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		choice provider.ToolChoice
		tools  []string // what a provider without tool_choice is sent
	}{
		{provider.ToolChoiceAuto, []string{"get_weather", "get_time"}},
		{provider.ToolChoiceRequired, []string{"get_weather", "get_time"}},
		{provider.ToolChoiceNone, nil},
		{provider.ToolChoiceFor("get_time"), []string{"get_time"}},
	}
	for _, c := range cases {
		t.Run(c.choice.String(), func(t *testing.T) {
			t.Parallel()
			b := h.setup(t, nil, h.Text)
			req := request()
			req.ToolChoice = c.choice
			if _, err := b.model.Generate(context.Background(), req); err != nil {
				t.Fatalf("generate: %v", err)
			}
			sent := h.Decode(t, b.f.lastBody())
			if h.Features.NativeToolChoice {
				if sent.ToolChoice != c.choice.String() {
					t.Errorf("tool choice sent = %q, want %q", sent.ToolChoice, c.choice.String())
				}
				checkTools(t, sent.Tools, []string{"get_weather", "get_time"})
				return
			}
			if sent.ToolChoice != "" {
				t.Errorf("provider has no tool_choice, but %q was sent", sent.ToolChoice)
			}
			checkTools(t, sent.Tools, c.tools)
		})
	}
	t.Run("no tools, no tool choice", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t, nil, h.Text)
		req := request()
		req.Tools = nil
		req.ToolChoice = provider.ToolChoiceNone
		if _, err := b.model.Generate(context.Background(), req); err != nil {
			t.Fatalf("generate: %v", err)
		}
		if sent := h.Decode(t, b.f.lastBody()); sent.ToolChoice != "" || len(sent.Tools) != 0 {
			t.Errorf("without tools, sent tool choice %q and %d tools", sent.ToolChoice, len(sent.Tools))
		}
	})
}

func (h Harness) testToolChoiceAbsent(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.Text)
	req := request()
	req.ToolChoice = provider.ToolChoiceFor("send_email")
	_, err := b.model.Generate(context.Background(), req)
	if !errors.Is(err, provider.ErrInvalidRequest) || !strings.Contains(err.Error(), "send_email") {
		t.Fatalf("err = %v, want ErrInvalidRequest naming send_email", err)
	}
	if n := b.f.attempts(); n != 0 {
		t.Errorf("an invalid request was sent %d times", n)
	}
}

func (h Harness) testStreamText(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.StreamText)
	var chunks []string
	resp, err := b.model.Stream(context.Background(), request(), func(d provider.Delta) {
		if d.ToolCall != nil {
			t.Errorf("unexpected tool call delta %+v", d.ToolCall)
		}
		chunks = append(chunks, d.Text)
	})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(chunks) < 2 || strings.Join(chunks, "") != WantText {
		t.Errorf("deltas = %q, want several that join to %q", chunks, WantText)
	}
	checkTextResponse(t, h, resp)
	if sent := h.Decode(t, b.f.lastBody()); !sent.Stream {
		t.Errorf("Stream did not ask for a stream")
	}
}

func (h Harness) testStreamToolCalls(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.StreamToolCalls)
	var deltaCalls []provider.ToolCall
	resp, err := b.model.Stream(context.Background(), request(), func(d provider.Delta) {
		if d.ToolCall != nil {
			deltaCalls = append(deltaCalls, *d.ToolCall)
		}
	})
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	checkCallsResponse(t, resp)
	if !reflect.DeepEqual(deltaCalls, resp.Message.ToolCalls) {
		t.Errorf("tool call deltas %s differ from the response's calls %s", dump(deltaCalls), dump(resp.Message.ToolCalls))
	}
}

func (h Harness) testStreamError(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.StreamError)
	_, err := b.model.Stream(context.Background(), request(), func(provider.Delta) {})
	apiErr, ok := isAPIError(err, 0)
	if !ok || !strings.Contains(apiErr.Message, WantStreamErrorMessage) {
		t.Fatalf("err = %v, want an *APIError with %q", err, WantStreamErrorMessage)
	}
	if n := b.f.attempts(); n != 1 {
		t.Errorf("a stream that failed after it started was sent %d times, want 1", n)
	}
}

func (h Harness) testStreamCutShort(t *testing.T) {
	t.Parallel()
	cut := h.StreamText
	lines := strings.SplitAfter(cut.Body, "\n")
	cut.Body = strings.Join(lines[:len(lines)/2], "")
	b := h.setup(t, nil, cut)
	_, err := b.model.Stream(context.Background(), request(), func(provider.Delta) {})
	if !errors.Is(err, provider.ErrMalformedResponse) {
		t.Fatalf("err = %v, want ErrMalformedResponse for a stream cut short", err)
	}
}

func (h Harness) rateLimited(retryAfter string) Reply {
	r := h.RateLimited
	r.Status = http.StatusTooManyRequests
	r.Header = http.Header{"Retry-After": {retryAfter}}
	return r
}

func (h Harness) testRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.rateLimited("7"), h.Text)
	resp, err := b.model.Generate(context.Background(), request())
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	checkTextResponse(t, h, resp)
	if n := b.f.attempts(); n != 2 {
		t.Errorf("attempts = %d, want 2", n)
	}
	if got := b.sleeps.all(); !reflect.DeepEqual(got, []time.Duration{7 * time.Second}) {
		t.Errorf("waits = %v, want [7s] as Retry-After said", got)
	}
}

func (h Harness) testRetryAfterDate(t *testing.T) {
	t.Parallel()
	at := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	b := h.setup(t, nil, h.rateLimited(at), h.Text)
	if _, err := b.model.Generate(context.Background(), request()); err != nil {
		t.Fatalf("generate: %v", err)
	}
	got := b.sleeps.all()
	// An HTTP date has whole seconds; the wait is what is left until then.
	if len(got) != 1 || got[0] <= 27*time.Second || got[0] > 30*time.Second {
		t.Errorf("waits = %v, want one wait until %s (27s..30s from now)", got, at)
	}
}

func (h Harness) testRetryAfterTooLong(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.rateLimited("3600"), h.Text)
	_, err := b.model.Generate(context.Background(), request())
	apiErr, ok := isAPIError(err, http.StatusTooManyRequests)
	if !ok {
		t.Fatalf("err = %v, want the 429 *APIError", err)
	}
	if apiErr.RetryAfter != time.Hour || !strings.Contains(apiErr.Error(), "retry after 1h0m0s") {
		t.Errorf("error = %v (RetryAfter %v), want it to say the hour asked for", apiErr, apiErr.RetryAfter)
	}
	if n := b.f.attempts(); n != 1 || len(b.sleeps.all()) != 0 {
		t.Errorf("attempts = %d, waits = %v; want 1 and none", n, b.sleeps.all())
	}
}

func (h Harness) serverError(status int) Reply {
	r := h.ServerError
	r.Status = status
	return r
}

func (h Harness) testServerErrorThenSuccess(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.serverError(500), h.serverError(502), h.Text)
	resp, err := b.model.Generate(context.Background(), request())
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	checkTextResponse(t, h, resp)
	if n := b.f.attempts(); n != 3 {
		t.Errorf("attempts = %d, want 3", n)
	}
	got := b.sleeps.all()
	// Exponential backoff from 100ms, ±20%: ~100ms then ~200ms.
	if len(got) != 2 || got[0] < 80*time.Millisecond || got[0] > 120*time.Millisecond ||
		got[1] < 160*time.Millisecond || got[1] > 240*time.Millisecond {
		t.Errorf("waits = %v, want ~100ms then ~200ms", got)
	}
	// Every attempt sends the same request.
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	for i := 1; i < len(b.f.bodies); i++ {
		if string(b.f.bodies[i]) != string(b.f.bodies[0]) {
			t.Errorf("attempt %d sent a different body", i+1)
		}
	}
}

func (h Harness) testAttemptsBounded(t *testing.T) {
	t.Parallel()
	b := h.setup(t, nil, h.serverError(503))
	_, err := b.model.Generate(context.Background(), request())
	apiErr, ok := isAPIError(err, http.StatusServiceUnavailable)
	if !ok {
		t.Fatalf("err = %v, want the 503 *APIError", err)
	}
	if n := b.f.attempts(); n != suiteRetry.MaxAttempts || apiErr.Attempts != suiteRetry.MaxAttempts {
		t.Errorf("attempts = %d (error says %d), want %d", n, apiErr.Attempts, suiteRetry.MaxAttempts)
	}
	if !apiErr.Temporary() {
		t.Errorf("a 503 should be temporary")
	}
}

func (h Harness) testBadRequest(t *testing.T) {
	t.Parallel()
	br := h.BadRequest
	br.Status = http.StatusBadRequest
	b := h.setup(t, nil, br, h.Text)
	_, err := b.model.Generate(context.Background(), request())
	apiErr, ok := isAPIError(err, http.StatusBadRequest)
	if !ok {
		t.Fatalf("err = %v, want a 400 *APIError", err)
	}
	if apiErr.Message != WantErrorMessage || !containsAll(err.Error(), h.Name, "400", WantErrorMessage) {
		t.Errorf("error = %q (message %q), want the provider's message %q", err, apiErr.Message, WantErrorMessage)
	}
	if apiErr.Temporary() {
		t.Errorf("a 400 should not be temporary")
	}
	if n := b.f.attempts(); n != 1 || len(b.sleeps.all()) != 0 {
		t.Errorf("a 400 was sent %d times (waits %v), want once", n, b.sleeps.all())
	}
}

func (h Harness) testMalformed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"id": "x", "choices": [`, `<html>502 Bad Gateway</html>`, `[]`} {
		b := h.setup(t, nil, Reply{Status: 200, ContentType: "application/json", Body: body})
		_, err := b.model.Generate(context.Background(), request())
		if !errors.Is(err, provider.ErrMalformedResponse) {
			t.Errorf("body %q: err = %v, want ErrMalformedResponse", body, err)
		}
		if n := b.f.attempts(); n != 1 {
			t.Errorf("body %q: sent %d times, want once", body, n)
		}
	}
}

func (h Harness) testCancelInFlight(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		b := h.setup(t, nil, h.Text)
		b.f.mu.Lock()
		b.f.block = make(chan struct{})
		b.f.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			var err error
			if stream {
				_, err = b.model.Stream(ctx, request(), func(provider.Delta) {})
			} else {
				_, err = b.model.Generate(ctx, request())
			}
			errc <- err
		}()
		<-b.f.arrived // the request is at the server
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("stream=%v: err = %v, want context.Canceled", stream, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream=%v: the client did not return after its context was canceled", stream)
		}
		if n := b.f.attempts(); n != 1 {
			t.Errorf("stream=%v: a canceled request was retried (%d attempts)", stream, n)
		}
	}
}

func (h Harness) testCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan struct{})
	sleep := func(ctx context.Context, d time.Duration) error {
		close(waiting)
		<-ctx.Done()
		return ctx.Err()
	}
	b := h.setup(t, []provider.Option{provider.WithSleep(sleep)}, h.rateLimited("5"), h.Text)
	errc := make(chan error, 1)
	go func() {
		_, err := b.model.Generate(ctx, request())
		errc <- err
	}()
	<-waiting
	cancel()
	err := <-errc
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "429") {
		t.Errorf("err = %v, want context.Canceled mentioning the 429 it was waiting out", err)
	}
	if n := b.f.attempts(); n != 1 {
		t.Errorf("attempts = %d, want 1", n)
	}
}
