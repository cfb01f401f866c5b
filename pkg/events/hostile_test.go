package events_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/testsupport/eventstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// A structured-mode event (the JSON event format as the CloudEvents SDK writes it) is
// read to the same event as its binary-mode twin, whichever way its publisher announces
// it: a Content-Type header in either case, or no header at all.
func TestDecodeStructuredMode(t *testing.T) {
	t.Parallel()
	for _, s := range sampleEvents(t) {
		binary, err := events.Encode(s.subject, s.event)
		if err != nil {
			t.Fatal(err)
		}
		want, err := events.Decode(events.CoreMsg(binary), 0)
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(eventstest.ToSDK(s.event))
		if err != nil {
			t.Fatal(err)
		}
		for name, h := range map[string]nats.Header{
			"Content-Type": {"Content-Type": {"application/cloudevents+json; charset=UTF-8"}},
			"content-type": {"content-type": {"application/cloudevents+json"}},
			"no headers":   nil,
		} {
			got, err := events.Decode(events.CoreMsg(&nats.Msg{Subject: s.subject, Header: h, Data: body}), 0)
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", s.event.ID, name, err, body)
			}
			if !reflect.DeepEqual(stripData(got), stripData(want)) || !jsonEqual(got.Data, want.Data) {
				t.Errorf("%s %s: structured %+v\nbinary %+v", s.event.ID, name, got, want)
			}
		}
	}
	call, _ := events.CallSubject(events.Identity{}, "echo")
	ct := nats.Header{"Content-Type": {"application/cloudevents+json"}}
	b64 := base64.StdEncoding.EncodeToString([]byte(`{"arguments":{"text":"hi"}}`))
	ce, err := events.DecodeCall(events.CoreMsg(&nats.Msg{Subject: call, Header: ct, Data: []byte(
		`{"specversion":"1.0","id":"urn:uuid:1","type":"io.toolfleet.tool.call","source":"/me","runid":"r 1","attempt":2,"data_base64":"` + b64 + `"}`)}), 0)
	if err != nil || ce.ID != "urn:uuid:1" || ce.RunID != "r 1" || ce.Attempt != 2 || string(ce.Call.Arguments) != `{"text":"hi"}` {
		t.Errorf("data_base64 call: %+v, %v", ce, err)
	}
	for name, tc := range map[string]struct{ body, header, want string }{
		"batch":           {`[{"specversion":"1.0"}]`, "application/cloudevents-batch+json", "batches are not"},
		"no specversion":  {`{"id":"c1","type":"io.toolfleet.tool.call","source":"/me","data":{}}`, "application/cloudevents+json", "specversion is missing"},
		"not JSON":        {`{"specversion":`, "application/cloudevents+json", "not valid JSON"},
		"id not a string": {`{"specversion":"1.0","id":7,"type":"io.toolfleet.tool.call","source":"/me","data":{}}`, "application/cloudevents+json", "id is not a string"},
		"no data":         {`{"specversion":"1.0","id":"c1","type":"io.toolfleet.tool.call","source":"/me"}`, "application/cloudevents+json", "no data"},
	} {
		_, err := events.Decode(events.CoreMsg(&nats.Msg{Subject: call, Header: nats.Header{"Content-Type": {tc.header}}, Data: []byte(tc.body)}), 0)
		assertCode(t, name, err, tools.CodeInvalidEvent, tc.want)
	}
}

func stripData(e events.Event) events.Event { e.Data = nil; return e }

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// nested returns a JSON value nesting n arrays around a string.
func nested(n int) string { return strings.Repeat("[", n) + `"x"` + strings.Repeat("]", n) }

// A body nested beyond what any decoder reads is refused as nested too deeply, not as
// invalid JSON; one within tools.MaxDepth decodes.
func TestDecodeCallNestedTooDeeply(t *testing.T) {
	t.Parallel()
	m := validCallMsg()
	m.Data = []byte(`{"arguments":{"a":` + nested(9999) + `}}`)
	_, err := events.DecodeCall(events.CoreMsg(m), 1<<20)
	assertCode(t, "9999 levels", err, tools.CodeInvalidEvent, "nested too deeply")
	m.Data = []byte(`{"arguments":{"a":` + nested(tools.MaxDepth-1) + `}}`)
	if _, err := events.DecodeCall(events.CoreMsg(m), 1<<20); err != nil {
		t.Errorf("arguments at the limit: %v", err)
	}
}

// A dead letter always fits the stream's limit, whatever it carries, and describes the
// whole body by size and SHA-256.
func TestDeadLetterIsBounded(t *testing.T) {
	t.Parallel()
	body := []byte(strings.Repeat("<", 2<<20))
	sum := sha256.Sum256(body)
	orig := &nats.Msg{Subject: "toolfleet.call." + strings.Repeat("x", 5000), Data: body,
		Header: nats.Header{"X-Big": {strings.Repeat("h", 100<<10)}, "X-Bad": {"\xff\x01"}}}
	for _, limit := range []int{1 << 20, 64 << 10, 1024} {
		m, err := events.NewDeadLetter("/test", "", events.DeadLetter{Reason: strings.Repeat("r", 10000),
			Error: tools.Errorf(tools.CodeInvalidEvent, "%s", strings.Repeat("e", 10000))}, events.CoreMsg(orig), limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) > limit {
			t.Errorf("limit %d: dead letter of %d bytes", limit, len(m.Data))
		}
		if !utf8.Valid(m.Data) {
			t.Errorf("limit %d: dead letter is not UTF-8", limit)
		}
		e, err := events.Decode(events.CoreMsg(m), limit)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		var d events.DeadLetter
		if err := e.DataAs(&d); err != nil {
			t.Fatal(err)
		}
		if d.BodySize != len(body) || d.BodySHA256 != hex.EncodeToString(sum[:]) || !d.BodyTruncated || len(d.Body) >= len(body) {
			t.Errorf("limit %d: size %d sha %s truncated %v kept %d", limit, d.BodySize, d.BodySHA256, d.BodyTruncated, len(d.Body))
		}
		if m.Subject != "toolfleet.dlq._unknown" {
			t.Errorf("dead letter of an unknown tool on %s", m.Subject)
		}
	}
}

// Results keep '<', '>' and '&' as they are, so an output's size is what the tool wrote.
func TestResultIsNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	out, _ := tools.MarshalJSON(strings.Repeat("<", 1000))
	m, err := events.NewResult("/test", events.Result{Status: events.StatusOK, CallID: "c", RunID: "r", Output: out}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(m.Data), `\u003c`) || len(m.Data) > 1300 {
		t.Errorf("result of a 1000-'<' output is %d bytes: %.80s", len(m.Data), m.Data)
	}
	if m.Header.Get(events.HeaderExpectedLastSubjectSeq) != "0" {
		t.Error("a result must be stored only where none is")
	}
}

// Whatever arrives, Decode and DecodeCall return an event or a coded error, never panic,
// and what they accept can be answered: its ids map to a result subject and its reply ids
// are valid event ids.
func FuzzDecodeCall(f *testing.F) {
	f.Add("toolfleet.call.echo", "c1", "r1", "1.0", []byte(`{"arguments":{"text":"hi"}}`))
	f.Add("toolfleet.call.*", "urn:uuid:1", "", "1.0", []byte(`{}`))
	f.Add("toolfleet.call.\xff", "\xff", "a\nb", "1.0", []byte(`{"arguments":"{\"a\":1}"}`))
	f.Add("toolfleet.call.echo", "", "", "", []byte(`{"specversion":"1.0","id":"x","type":"io.toolfleet.tool.call","source":"/","data":{}}`))
	f.Add("toolfleet.call.echo", "c", "", "1.0", []byte(nested(20000)))
	f.Fuzz(func(t *testing.T, subject, id, run, sv string, body []byte) {
		h := nats.Header{}
		for k, v := range map[string]string{"ce-id": id, "ce-runid": run, "ce-specversion": sv} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		h["ce-type"] = []string{events.TypeCall}
		h["ce-source"] = []string{"/fuzz"}
		m := &nats.Msg{Subject: subject, Header: h, Data: body}
		_, derr := events.Decode(events.CoreMsg(m), 1<<16)
		ce, err := events.DecodeCall(events.CoreMsg(m), 1<<16)
		for _, e := range []error{derr, err} {
			var te *tools.Error
			if e != nil && !errors.As(e, &te) {
				t.Fatalf("error %v is not a *tools.Error", e)
			}
		}
		if err != nil {
			return
		}
		if events.ValidateEventID("id", ce.ID) != nil {
			t.Fatalf("accepted a call whose id %q is not a valid event id", ce.ID)
		}
		rs, rerr := events.ResultSubject("", events.ReplyID(ce.RunIDOrSelf()), events.ReplyID(ce.ID))
		if rerr != nil || strings.Count(rs, ".") != 3 {
			t.Fatalf("accepted call %q cannot be answered: %q %v", ce.ID, rs, rerr)
		}
		if _, ok := events.ToolOfCallSubject(subject); !ok {
			t.Fatalf("accepted a call on %q, which names no tool", subject)
		}
	})
}

// Trace context passes from a call into the headers of other events, so a structured
// event cannot smuggle a header break (or anything but printable ASCII) through it.
func TestTraceContextIsChecked(t *testing.T) {
	t.Parallel()
	call, _ := events.CallSubject(events.Identity{}, "echo")
	for _, tp := range []string{"00-abc\r\nNats-Msg-Id: x", "é", strings.Repeat("a", 513)} {
		body, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "c1", "type": events.TypeCall, "source": "/x",
			"traceparent": tp, "data": map[string]any{}})
		_, err := events.Decode(events.CoreMsg(&nats.Msg{Subject: call, Data: body}), 0)
		assertCode(t, "traceparent", err, tools.CodeInvalidEvent, "trace context")
	}
}
