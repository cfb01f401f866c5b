package plannerapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/planner"
	"github.com/toolfleet/toolfleet/internal/provider"
	"github.com/toolfleet/toolfleet/internal/testsupport/plannertest"
	"github.com/toolfleet/toolfleet/internal/testsupport/providertest"
)

// OpenAI's streaming wire format (chat.completion.chunk events), as the provider tests'
// fixtures give it: two parallel tool calls, then a text answer in several chunks.
const openAIStreamCalls = `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_7qAWOXnBgqv4NtmXjdrvK1tE","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"zone\": \"Europe/Paris\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":41,"total_tokens":123}}

data: [DONE]

`

// openAITextChunk is one chunk of a streamed text answer.
func openAITextChunk(text string) string {
	b, _ := json.Marshal(text)
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":` + string(b) + `},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
}

const openAITextEnd = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":57,"completion_tokens":15,"total_tokens":72}}

data: [DONE]

`

// textChunks split providertest.WantText in many small chunks, as providers stream it.
func textChunks() []string {
	var out []string
	for w := range strings.SplitAfterSeq(providertest.WantText, " ") {
		out = append(out, w)
	}
	return out
}

// openAIStreamServer answers the first request with two tool calls and the later ones
// with WantText, streamed chunk by chunk with a pause every few chunks, in OpenAI's
// streaming wire format. It fails a request that does not ask for a stream.
func openAIStreamServer(t *testing.T) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Stream bool `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || !body.Stream {
			http.Error(w, `{"error":{"message":"want a streaming request"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		if n.Add(1) == 1 {
			fmt.Fprint(w, openAIStreamCalls)
			return
		}
		fmt.Fprint(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n")
		for i, c := range textChunks() {
			fmt.Fprint(w, openAITextChunk(c))
			f.Flush()
			if i%3 == 2 {
				time.Sleep(30 * time.Millisecond) // let some deltas go out on their own
			}
		}
		fmt.Fprint(w, openAITextEnd)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// sseEvent is one event read from the planner's SSE endpoint.
type sseEvent struct {
	ID    uint64
	Event string
	Data  json.RawMessage
}

// readEvents reads the run's SSE stream to its end, resuming after lastID when it is set.
func readEvents(t *testing.T, base, run, lastID string) (int, []sseEvent) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/runs/"+run+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		}
	}
	return resp.StatusCode, out
}

// A run on a model speaking OpenAI's streaming wire format: its SSE stream shows the
// tool calls as they arrive and the answer's text deltas in order, whose concatenation is
// the answer; a client reconnecting with Last-Event-ID gets only the later events.
func TestStreamedRunEvents(t *testing.T) {
	b := setup(t, nil)
	fixture := openAIStreamServer(t)
	m, err := provider.NewOpenAI(providertest.WantModel, provider.WithBaseURL(fixture.URL), provider.WithAPIKey(providertest.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	b.swapPlanner(t, planner.Config{Models: map[string]provider.Model{"main": m}})
	api := httptest.NewServer(Handler(b.p, Auth{}))
	defer api.Close()

	run := b.run(t, planner.StartRequest{Input: "What is the weather in Paris, and the time there?"})
	if run.Termination != planner.TerminationCompleted || run.Answer != providertest.WantText {
		t.Fatalf("run ended %s with %q", run.Termination, run.Answer)
	}
	// The stored conversation holds the answer once, as one message.
	last := run.Messages[len(run.Messages)-1]
	if last.Role != provider.RoleAssistant || last.Text != providertest.WantText {
		t.Fatalf("last message %+v", last)
	}

	status, evs := readEvents(t, api.URL, run.ID, "")
	if status != http.StatusOK || len(evs) == 0 || evs[len(evs)-1].Event != "done" {
		t.Fatalf("status %d, events %v", status, evs)
	}
	var text strings.Builder
	var started []string
	index, firstDelta := 0, uint64(0)
	for i, e := range evs {
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Fatalf("event ids not increasing: %d after %d", e.ID, evs[i-1].ID)
		}
		d := plannertest.DecodeEventData(t, e.Event, e.Data)
		switch e.Event {
		case "text_delta":
			var td struct {
				Text  string `json:"text"`
				Index int    `json:"index"`
			}
			if err := json.Unmarshal(d.Detail, &td); err != nil {
				t.Fatal(err)
			}
			if td.Index != index || *d.Step != 1 {
				t.Fatalf("text_delta %d at step %d, want index %d at step 1", td.Index, *d.Step, index)
			}
			if index == 0 {
				firstDelta = e.ID
			}
			index++
			text.WriteString(td.Text)
		case "tool_call_started":
			var tc struct {
				Tool        string `json:"tool"`
				ModelCallID string `json:"modelCallId"`
			}
			if err := json.Unmarshal(d.Detail, &tc); err != nil {
				t.Fatal(err)
			}
			if d.CallID != callID(run.ID, 0, len(started)) || tc.ModelCallID == "" {
				t.Fatalf("tool_call_started %s: call %s, model call %q", tc.Tool, d.CallID, tc.ModelCallID)
			}
			started = append(started, tc.Tool)
		}
	}
	if text.String() != providertest.WantText {
		t.Fatalf("text deltas say %q, want %q", text.String(), providertest.WantText)
	}
	if strings.Join(started, ",") != "get_weather,get_time" {
		t.Fatalf("tool_call_started for %v", started)
	}

	// Resuming after the first text delta: only what followed it, in the same order.
	status, tail := readEvents(t, api.URL, run.ID, strconv.FormatUint(firstDelta, 10))
	var want []uint64
	for _, e := range evs {
		if e.ID > firstDelta {
			want = append(want, e.ID)
		}
	}
	var got []uint64
	for _, e := range tail {
		got = append(got, e.ID)
	}
	if status != http.StatusOK || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resumed after %d: status %d, ids %v, want %v", firstDelta, status, got, want)
	}
	// A client that saw done is told there is nothing more.
	if status, rest := readEvents(t, api.URL, run.ID, strconv.FormatUint(evs[len(evs)-1].ID, 10)); status != http.StatusNoContent || len(rest) != 0 {
		t.Fatalf("resumed after done: status %d, %d events", status, len(rest))
	}
	if status, _ := readEvents(t, api.URL, run.ID, "x"); status != http.StatusBadRequest {
		t.Fatalf("Last-Event-ID x: status %d", status)
	}
}
