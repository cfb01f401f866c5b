package plannerapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// exchange is one request to the API and its answer, as the conformance test saw them.
type exchange struct {
	method, path string
	reqBody      []byte
	status       int
	contentType  string
	respBody     []byte
}

// recorder keeps every exchange with the handler it wraps.
type recorder struct {
	next     http.Handler
	inFlight atomic.Int32
	mu       sync.Mutex
	seen     []exchange
}

// capture is a ResponseWriter that keeps a copy of what it writes (and flushes, for SSE).
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(s int) { c.status = s; c.ResponseWriter.WriteHeader(s) }
func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(b)
	return c.ResponseWriter.Write(b)
}
func (c *capture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.inFlight.Add(1)
	defer rec.inFlight.Add(-1)
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	c := &capture{ResponseWriter: w}
	rec.next.ServeHTTP(c, r)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.seen = append(rec.seen, exchange{method: r.Method, path: r.URL.Path, reqBody: body, status: c.status,
		contentType: c.Header().Get("Content-Type"), respBody: c.body.Bytes()})
}

// openAPIDoc is the served document, decoded, with its schemas compiled on demand.
type openAPIDoc struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	raw, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi: %v, want 3.1.0", doc["openapi"])
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("openapi.json", inst); err != nil {
		t.Fatal(err)
	}
	return &openAPIDoc{doc: doc, compiler: c, compiled: map[string]*jsonschema.Schema{}}
}

// pointerEscape escapes a JSON pointer token.
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// schema compiles the schema at the JSON pointer ptr of the document.
func (d *openAPIDoc) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	if s, ok := d.compiled[ptr]; ok {
		return s
	}
	s, err := d.compiler.Compile("openapi.json#" + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	d.compiled[ptr] = s
	return s
}

// at returns the value at the JSON pointer ptr, nil if none.
func (d *openAPIDoc) at(ptr string) any {
	var v any = d.doc
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		v = m[tok]
	}
	return v
}

// deref follows a "$ref" at ptr to the pointer it names.
func (d *openAPIDoc) deref(ptr string) string {
	if m, ok := d.at(ptr).(map[string]any); ok {
		if ref, ok := m["$ref"].(string); ok {
			return strings.TrimPrefix(ref, "#")
		}
	}
	return ptr
}

// operations lists the document's operations as "METHOD /path".
func (d *openAPIDoc) operations() []string {
	var out []string
	for path, item := range d.doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// route finds the document's path template of a request path.
func (d *openAPIDoc) route(path string) (string, bool) {
	for tmpl := range d.doc["paths"].(map[string]any) {
		re := "^" + regexp.MustCompile(`\\\{[^/]+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		if regexp.MustCompile(re).MatchString(path) {
			return tmpl, true
		}
	}
	return "", false
}

// validate checks an exchange against the document: its operation exists, its request
// body fits the operation's schema (unless refused as malformed), its status is documented, and its body fits that
// answer's schema (each SSE event's data, a RunEvent). It returns "METHOD /template".
func (d *openAPIDoc) validate(t *testing.T, e exchange) string {
	t.Helper()
	tmpl, ok := d.route(e.path)
	if !ok {
		return ""
	}
	op := "/paths/" + pointerEscape(tmpl) + "/" + strings.ToLower(e.method)
	if d.at(op) == nil {
		t.Errorf("%s %s: no such operation in the document", e.method, tmpl)
		return ""
	}
	name := e.method + " " + tmpl
	// A request refused as malformed (400, 415) need not fit; any other must.
	if len(e.reqBody) > 0 && e.status != http.StatusBadRequest && e.status != http.StatusUnsupportedMediaType {
		ptr := d.deref(op+"/requestBody") + "/content/application~1json/schema"
		if d.at(ptr) == nil {
			t.Errorf("%s: a request body, and the document describes none", name)
		} else {
			d.check(t, name+" request", ptr, e.reqBody)
		}
	}
	resp := op + "/responses/" + strconv.Itoa(e.status)
	if d.at(resp) == nil {
		t.Errorf("%s: status %d is not documented (body %s)", name, e.status, e.respBody)
		return name
	}
	resp = d.deref(resp)
	switch {
	case strings.HasPrefix(e.contentType, "application/json"):
		ptr := resp + "/content/application~1json/schema"
		if d.at(ptr) == nil {
			t.Errorf("%s %d: a JSON body, and the document describes none", name, e.status)
			return name
		}
		d.check(t, name+" "+strconv.Itoa(e.status), ptr, e.respBody)
	case e.contentType == "text/event-stream":
		if d.at(resp+"/content/text~1event-stream") == nil {
			t.Errorf("%s %d: an event stream, and the document describes none", name, e.status)
		}
		sc := bufio.NewScanner(bytes.NewReader(e.respBody))
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				d.check(t, name+" event", "/components/schemas/RunEvent", []byte(data))
			}
		}
	case len(e.respBody) > 0:
		t.Errorf("%s %d: body of content type %q", name, e.status, e.contentType)
	}
	return name
}

func (d *openAPIDoc) check(t *testing.T, what, ptr string, body []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: not JSON: %v: %s", what, err, body)
		return
	}
	if err := d.schema(t, ptr).Validate(v); err != nil {
		t.Errorf("%s does not fit the document's schema %s: %v\nbody: %s", what, ptr, err, body)
	}
}

// Every route the API serves is in the OpenAPI document, and every operation of the
// document is served.
func TestOpenAPIRoutes(t *testing.T) {
	d := loadOpenAPI(t)
	var served []string
	for _, rt := range routes {
		served = append(served, rt.pattern)
	}
	for p := range publicPaths {
		served = append(served, "GET "+p)
	}
	slices.Sort(served)
	if got := d.operations(); !slices.Equal(got, served) {
		t.Fatalf("the document's operations:\n%v\nthe routes served:\n%v", got, served)
	}
}

// Every endpoint, driven with real requests against a real planner on JetStream: each
// request body and each answer (errors and SSE events included) fits the document's
// schemas, and every operation of the document was exercised.
func TestOpenAPIConformance(t *testing.T) {
	d := loadOpenAPI(t)
	b, _ := listServer(t)
	rec := &recorder{next: Handler(b.p, Auth{Tokens: map[string]events.Identity{
		HashToken(acmeToken):   {Tenant: "acme", Role: "user"},
		HashToken(globexToken): {Tenant: "globex", Role: "user"},
	}})}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	call := func(method, path, token string, body any) map[string]any {
		t.Helper()
		_, out := apiCall(t, srv, method, path, token, body)
		return out
	}
	raw := func(method, path, token, body string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	// The public endpoints.
	raw("GET", "/openapi.json", "", "")
	raw("GET", "/healthz", "", "")
	raw("GET", "/readyz", "", "")

	// Runs: started, read, listed, continued; and the errors.
	done := call("POST", "/v1/runs", acmeToken, map[string]any{"input": "hello", "wait": true, "metadata": map[string]string{"from": "test"}})["id"].(string)
	calc := call("POST", "/v1/runs", acmeToken, map[string]any{"input": "add", "model": "calc", "tools": []string{"add"},
		"limits": map[string]any{"maxSteps": 4, "timeout": "1m"}, "stopWhen": []map[string]any{{"tool": "echo"}}, "wait": true})["id"].(string)
	call("POST", "/v1/runs", acmeToken, map[string]any{"input": "delegate", "model": "delegate", "tools": []string{"add", "run_agent"}, "wait": true})
	call("POST", "/v1/runs", acmeToken, map[string]any{"input": "fail", "model": "fails", "wait": true})
	call("POST", "/v1/runs", acmeToken, map[string]any{"input": "x", "tools": []string{"no_such_tool"}})
	call("POST", "/v1/runs", "", map[string]any{"input": "x"})
	raw("POST", "/v1/runs", acmeToken, `{"input": 1}`, "Content-Type", "application/json")
	raw("POST", "/v1/runs", acmeToken, `input`, "Content-Type", "text/plain")
	call("GET", "/v1/runs/"+calc, acmeToken, nil)
	call("GET", "/v1/runs/"+calc, globexToken, nil)
	call("GET", "/v1/runs/"+calc+"/messages", acmeToken, nil)
	call("GET", "/v1/runs/nope/messages", acmeToken, nil)
	awaitListed(t, srv, acmeToken, "", 5)
	call("GET", "/v1/runs?status=done&tool=add&limit=2", acmeToken, nil)
	call("GET", "/v1/runs?status=sleeping", acmeToken, nil)
	call("POST", "/v1/runs/"+done+"/messages", acmeToken, map[string]any{"input": "again", "id": "f1"})
	call("POST", "/v1/runs/"+done+"/messages", acmeToken, map[string]any{"input": "again", "id": "f1"})
	call("POST", "/v1/runs/"+done+"/messages", acmeToken, map[string]any{"input": "and again", "wait": true})
	call("POST", "/v1/runs/"+calc+"/tools", acmeToken, map[string]any{"disable": []string{"add"}, "reminder": "no more adding"})
	call("POST", "/v1/runs/"+calc+"/tools", acmeToken, map[string]any{"enable": []string{"no_such_tool"}})

	// Pause and resume: a run paused after its first step, its model's view, an edit
	// that does not fit, a resume with a compaction and new limits; then both refused.
	paused := call("POST", "/v1/runs", acmeToken, map[string]any{"input": "add", "model": "calc", "tools": []string{"add"},
		"pause": map[string]any{"afterEveryStep": true}, "wait": true})["id"].(string)
	call("GET", "/v1/runs/"+paused+"/messages?view=model", acmeToken, nil)
	call("GET", "/v1/runs/"+paused+"/messages?view=sideways", acmeToken, nil)
	natstest.Eventually(t, waitTimeout, "the paused run to be listed", func() bool {
		var page struct{ Runs []struct{ ID, Status string } }
		getJSON(t, srv, "/v1/runs?status=paused", acmeToken, &page)
		return len(page.Runs) == 1 && page.Runs[0].ID == paused && page.Runs[0].Status == "paused"
	})
	call("POST", "/v1/runs/"+paused+"/pause", acmeToken, map[string]any{"reason": "look"})
	call("POST", "/v1/runs/"+paused+"/resume", acmeToken, map[string]any{"drop": []int{2}})
	call("POST", "/v1/runs/"+paused+"/resume", acmeToken, map[string]any{
		"compact": map[string]any{"from": 0, "to": 3, "summary": "2 + 3 is 5"}, "limits": map[string]any{"maxSteps": 5}})
	b.wait(t, paused)
	call("GET", "/v1/runs/"+paused+"/messages?view=model", acmeToken, nil)
	call("POST", "/v1/runs/"+paused+"/resume", acmeToken, nil)
	call("POST", "/v1/runs/"+paused+"/pause", acmeToken, nil)

	// Fork and diff: a fork from step 1 with an input, refused forks, the diff of the
	// run and its fork, the model's view at a step; the run's events as a JSON list.
	fork := call("POST", "/v1/runs/"+calc+"/fork", acmeToken, map[string]any{"fromStep": 1, "input": "once more", "limits": map[string]any{"maxSteps": 4}})["id"].(string)
	call("POST", "/v1/runs/"+calc+"/fork", acmeToken, map[string]any{"fromStep": 99})
	call("POST", "/v1/runs/"+calc+"/fork", globexToken, map[string]any{"fromStep": 0})
	b.wait(t, fork)
	call("GET", "/v1/runs/"+calc+"/diff/"+fork, acmeToken, nil)
	call("GET", "/v1/runs/"+calc+"/diff/"+fork, globexToken, nil)
	call("GET", "/v1/runs/"+calc+"/messages?view=model&step=1", acmeToken, nil)
	call("GET", "/v1/runs?forkedFrom="+calc, acmeToken, nil)
	raw("GET", "/v1/runs/"+calc+"/events?limit=2", acmeToken, "", "Accept", "application/json")

	// Events: a run's, replayed to its end, resumed after its end (204), bad ids.
	var last uint64
	raw("GET", "/v1/runs/"+calc+"/events", "", "")
	req, _ := http.NewRequest("GET", srv.URL+"/v1/runs/"+calc+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for line := range strings.SplitSeq(string(body), "\n") {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last, _ = strconv.ParseUint(id, 10, 64)
		}
	}
	raw("GET", "/v1/runs/"+calc+"/events", acmeToken, "", "Last-Event-ID", strconv.FormatUint(last, 10))
	raw("GET", "/v1/runs/"+calc+"/events", acmeToken, "", "Last-Event-ID", "yesterday")

	// The tenant's events, live: a run started while the stream is open.
	ch := make(chan sseEvent, 100)
	req, _ = http.NewRequest("GET", srv.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	go readSSE(bufio.NewReader(resp.Body), ch)
	call("POST", "/v1/runs", acmeToken, map[string]any{"input": "live", "wait": true})
	for e := range ch {
		if e.Event == "done" {
			break
		}
	}
	resp.Body.Close()
	raw("GET", "/v1/events?lastEventId=x", acmeToken, "")

	// Approvals: listed pending, answered (then refused), listed answered; a run
	// canceled while waiting, canceled again (409).
	waiting := call("POST", "/v1/runs", acmeToken, map[string]any{"input": "clean up", "model": "approval", "tools": []string{"delete_all"}})["id"].(string)
	c := b.awaitApproval(t, waiting)
	natstest.Eventually(t, waitTimeout, "the pending approval to be listed", func() bool {
		var page struct{ Approvals []any }
		getJSON(t, srv, "/v1/approvals", acmeToken, &page)
		return len(page.Approvals) == 1
	})
	call("POST", "/v1/approvals/"+c.ID, acmeToken, map[string]any{"decision": "approve", "by": "alice", "reason": "fine"})
	call("POST", "/v1/approvals/"+c.ID, acmeToken, map[string]any{"decision": "deny"})
	call("POST", "/v1/approvals/"+c.ID, acmeToken, map[string]any{"decision": "perhaps"})
	b.wait(t, waiting)
	natstest.Eventually(t, waitTimeout, "the answered approval to be listed", func() bool {
		var page struct{ Approvals []any }
		getJSON(t, srv, "/v1/approvals?status=answered", acmeToken, &page)
		return len(page.Approvals) == 1
	})
	call("GET", "/v1/approvals?status=all&limit=1", acmeToken, nil)
	cancelMe := call("POST", "/v1/runs", acmeToken, map[string]any{"input": "clean up", "model": "approval", "tools": []string{"delete_all"}})["id"].(string)
	b.awaitApproval(t, cancelMe)
	call("POST", "/v1/runs/"+cancelMe+"/cancel", acmeToken, map[string]any{"reason": "changed my mind"})
	raw("POST", "/v1/runs/"+cancelMe+"/cancel", acmeToken, "")
	call("POST", "/v1/runs/"+cancelMe+"/messages", acmeToken, map[string]any{"input": "go on"})

	// Tools and dead letters.
	call("GET", "/v1/tools", acmeToken, nil)
	if err := b.nc.Publish("toolfleet.call.echo.acme.user", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, waitTimeout, "a dead letter", func() bool {
		var page struct{ DeadLetters []any }
		getJSON(t, srv, "/v1/dead-letters?tool=echo", acmeToken, &page)
		return len(page.DeadLetters) == 1
	})
	call("GET", "/v1/dead-letters?limit=0", acmeToken, nil)
	// An exchange is recorded once its handler returns, which may be after its client
	// has the answer.
	natstest.Eventually(t, waitTimeout, "every handler to return", func() bool { return rec.inFlight.Load() == 0 })

	rec.mu.Lock()
	seen := slices.Clone(rec.seen)
	rec.mu.Unlock()
	exercised := map[string]bool{}
	for _, e := range seen {
		if name := d.validate(t, e); name != "" {
			exercised[name] = true
		}
	}
	for _, op := range d.operations() {
		if !exercised[op] {
			t.Errorf("%s was not exercised", op)
		}
	}
}
