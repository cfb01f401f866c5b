package events

import (
	"bytes"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// hostileStrings are strings that encoders get wrong: escapes, control characters, HTML
// characters, invalid UTF-8, the JavaScript line separators, surrogates written as
// UTF-8, long runs.
var hostileStrings = []string{
	"", "plain", `"quoted"`, `back\slash`, "<script>&amp;</script>", "tab\tnew\nline\rret\bbs\fff",
	"\x00\x01\x1f\x7f", "\u2028\u2029", "héllo wörld ✓ 𝄞", "\xff\xfe", "a\xc3", "\xed\xa0\x80",
	"\xf4\x90\x80\x80", "\u00e9\u0301", "ſK", strings.Repeat("<&>", 100), strings.Repeat("\\\"", 50),
	"\ufeffbom", "\ufffd", "nul\x00mid",
}

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return hostileStrings[r.IntN(len(hostileStrings))]
	}
	n := r.IntN(40)
	b := make([]byte, n)
	for i := range b {
		switch r.IntN(4) {
		case 0:
			b[i] = byte(r.IntN(256)) // any byte, invalid UTF-8 included
		case 1:
			b[i] = byte(r.IntN(0x20))
		default:
			b[i] = byte('a' + r.IntN(26))
		}
	}
	s := string(b)
	if r.IntN(4) == 0 {
		s += "\u2028" + hostileStrings[r.IntN(len(hostileStrings))]
	}
	return s
}

// randJSON returns a JSON text, valid or not, with odd spacing.
func randJSON(r *rand.Rand) json.RawMessage {
	valid := []string{`true`, `null`, `0`, `-1.5e+10`, `"x"`, ` { "a" : [ 1 , 2 , {"b":null} ] } `,
		"\t[\n]\r", `{"s":"<&>\u2028"}`, `"` + "\u2028" + `"`, `{"a":1,"a":2}`, `"\ud800"`, `[1e400]`,
		strings.Repeat("[", 500) + strings.Repeat("]", 500), `{"k":"` + strings.Repeat("x", 3000) + `"}`,
		"\"\xff\"", `{"error":{"code":"tool_error","message":"m"}}`}
	invalid := []string{`{`, `tru`, `{"a":}`, `[1,]`, `01`, "\"\x01\"", `{"a" 1}`, `nul`, `1 2`, `'x'`, `+1`, `.5`,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000)}
	switch r.IntN(10) {
	case 0:
		return nil
	case 1:
		return json.RawMessage(invalid[r.IntN(len(invalid))])
	case 2:
		b, _ := json.Marshal(randString(r))
		return b
	}
	return json.RawMessage(valid[r.IntN(len(valid))])
}

func randTime(r *rand.Rand) time.Time {
	switch r.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // not RFC 3339: an error
	case 2:
		return time.Date(2026, 11, 23, 17, 4, 5, r.IntN(1e9), time.FixedZone("odd", 5*3600+30*60))
	case 3:
		return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	case 4:
		return time.Unix(0, r.Int64()).UTC()
	}
	return time.Now().UTC()
}

func randRef(r *rand.Rand) *PayloadRef {
	if r.IntN(3) > 0 {
		return nil
	}
	return &PayloadRef{ID: randString(r), Tenant: randString(r), Size: r.Int64() - r.Int64(), Chunks: r.IntN(10) - 2, SHA256: randString(r)}
}

func randResult(r *rand.Rand) Result {
	res := Result{Status: Status(randString(r)), Output: randJSON(r), OutputRef: randRef(r), DurationMS: r.Int64() - r.Int64(),
		Attempts: r.IntN(5) - 1, Executor: randString(r), Validated: r.IntN(2) == 0, NoSchemaMode: tools.NoSchemaMode(randString(r)),
		OutputUTF8Repaired: r.IntN(2) == 0, Tool: randString(r), CallID: randString(r), RunID: randString(r),
		StartedAt: randTime(r), FinishedAt: randTime(r), LimitWaitMS: int64(r.IntN(3) - 1)}
	if r.IntN(2) == 0 {
		res.Caller = Identity{Tenant: randString(r), Role: randString(r)}
	}
	if r.IntN(2) == 0 {
		res.Error = &tools.Error{Code: tools.Code(randString(r)), Message: randString(r), RetryAfterMS: int64(r.IntN(3))}
		if r.IntN(3) == 0 {
			res.Error.Violations = []tools.Violation{{Pointer: randString(r), Message: randString(r)}, {}}
		}
	}
	if r.IntN(4) == 0 {
		res.Approval = &Approval{Decision: Decision(randString(r)), By: randString(r), At: randTime(r),
			ArgumentsOriginal: randJSON(r), ArgumentsOriginalRef: randRef(r)}
	}
	return res
}

func randCall(r *rand.Rand) Call {
	c := Call{Tool: randString(r), Arguments: randJSON(r), ArgumentsRef: randRef(r)}
	if n := r.IntN(4); n > 0 {
		c.Metadata = map[string]string{}
		for range n {
			c.Metadata[randString(r)] = randString(r)
		}
	}
	return c
}

// sameAsReflection fails t unless fast wrote what tools.MarshalJSON writes for v, or
// both refused it.
func sameAsReflection(t *testing.T, v any, fast []byte, fastErr error) {
	t.Helper()
	want, wantErr := tools.MarshalJSON(v)
	if (fastErr != nil) != (wantErr != nil) || !bytes.Equal(fast, want) ||
		(fastErr != nil && fastErr.Error() != wantErr.Error()) {
		t.Fatalf("%#v:\nfast       %q (%v)\nreflection %q (%v)", v, fast, fastErr, want, wantErr)
	}
}

func TestResultEncodingMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		res := randResult(r)
		b, err := marshalResult(&res)
		sameAsReflection(t, res, b, err)
	}
}

func TestCallEncodingMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		c := randCall(r)
		b, err := marshalCall(&c)
		sameAsReflection(t, c, b, err)
	}
}

func TestStringEncodingMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	check := func(s string) {
		want, _ := tools.MarshalJSON(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	}
	for _, s := range hostileStrings {
		check(s)
	}
	for c := range 0x110000 { // every code point, and each alone as bytes
		check(string(rune(c)))
	}
	for b := range 256 {
		check(string([]byte{byte(b)}))
	}
	for range 50000 {
		check(randString(r))
	}
}

func FuzzResultEncoding(f *testing.F) {
	for _, s := range hostileStrings {
		f.Add(s, []byte(`{"a":1}`), int64(3))
	}
	f.Fuzz(func(t *testing.T, s string, out []byte, n int64) {
		res := Result{Status: Status(s), Output: out, Tool: s, CallID: s, RunID: s, Executor: s, DurationMS: n,
			Error: &tools.Error{Code: tools.Code(s), Message: s, RetryAfterMS: n}, Caller: Identity{Tenant: s},
			StartedAt: time.Unix(0, n).UTC()}
		b, err := marshalResult(&res)
		sameAsReflection(t, res, b, err)
	})
}

// BenchmarkResultData compares the result's encoder with encoding/json's reflection on
// a typical result; read the ratio of ns/op.
func BenchmarkResultData(b *testing.B) {
	now := time.Now().UTC()
	res := Result{Status: StatusOK, Output: json.RawMessage(`{"temperature":21.5,"unit":"C","city":"Oslo"}`),
		DurationMS: 3, Attempts: 1, Executor: "ex-7f9c", Validated: true, Tool: "get_weather", CallID: "call_0123456789",
		RunID: "run_0123456789", StartedAt: now, FinishedAt: now}
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalResult(&res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tools.MarshalJSON(res); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// callDataInputs are call bodies, plain and hostile, for the decoder's tests.
func callDataInputs(r *rand.Rand, n int) [][]byte {
	fixed := []string{`{}`, `null`, `[]`, `"x"`, `{"tool":"t"}`, `{"tool":null}`, `{"tool":1}`, `{"Tool":"t"}`,
		`{"TOOL":"t","ARGUMENTS":{}}`, `{"toſl":"t"}`, `{"t\u006fol":"t"}`, `{"tool":"t\u0041"}`, `{"tool":"a","tool":"b"}`,
		`{"arguments":{"a":1},"arguments":[2]}`, `{"arguments":null}`, `{"arguments": { "a" : 1 } }`, ` {"arguments":"{\"a\":1}"} `,
		`{"arguments_ref":null}`, `{"arguments_ref":{"id":"p","size":1,"chunks":1,"sha256":"x"}}`, `{"arguments_ref":1}`,
		`{"metadata":null}`, `{"metadata":{}}`, `{"metadata":{"a":"1","a":"2"}}`, `{"metadata":{"a":1}}`, `{"metadata":{"a":null}}`,
		`{"metadata":{"a":"1"},"metadata":{"b":"2"}}`, `{"metadata":[]}`, `{"metadata":{"\u00e9":"x"}}`, `{"metadata":{"é":"ü"}}`,
		"{\"tool\":\"\xff\"}", "{\"metadata\":{\"k\":\"\xc3\"}}", `{"other":1,"tool":"t"}`, `{"tool":"t",}`, `{"tool":"t"} x`,
		`{"tool":"t"}{}`, `{"tool" "t"}`, `{"arguments":01}`, `{"arguments":[1,]}`, `{"arguments":-}`, `{"arguments":1.}`,
		`{"arguments":1e}`, `{"arguments":"\x"}`, `{"arguments":"\u12"}`, `{"arguments":tru}`, "{\"arguments\":\"\x01\"}",
		`{"arguments":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
		`{"arguments":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
		`{"arguments":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		"\t{\n\"tool\"\r:\"t\" }\n", `{"arguments":{"tool":"inner"},"tool":"outer"}`, ``, ` `, `{`, `{"tool":"t"`, `{"a":}`}
	var in [][]byte
	for _, f := range fixed {
		in = append(in, []byte(f))
	}
	for range n {
		c := randCall(r)
		c.ArgumentsRef = nil
		b, err := tools.MarshalJSON(c)
		if err != nil {
			continue
		}
		in = append(in, b, mutate(r, b))
	}
	return in
}

// mutate damages or respaces a JSON text.
func mutate(r *rand.Rand, b []byte) []byte {
	if len(b) == 0 {
		return []byte("{")
	}
	b = bytes.Clone(b)
	switch r.IntN(5) {
	case 0:
		return b[:r.IntN(len(b)+1)]
	case 1:
		b[r.IntN(len(b))] = byte(r.IntN(256))
		return b
	case 2:
		i := r.IntN(len(b) + 1)
		return append(b[:i:i], append([]byte(" \n\t"[r.IntN(3):]), b[i:]...)...)
	case 3:
		return bytes.ReplaceAll(b, []byte(`"tool"`), []byte(`"Tool"`))
	}
	return bytes.ReplaceAll(b, []byte(`,`), []byte(` , `))
}

func TestCallDecodingMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, data := range callDataInputs(r, 5000) {
		sameDecoding(t, data)
	}
	// What the planner and pkg/client send takes the fast path, or it helps nobody.
	for _, c := range []Call{{Tool: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo","days":3,"units":["C"],"x":null}`)},
		{Tool: "t", Arguments: json.RawMessage(`"{\"a\":1}"`), Metadata: map[string]string{"user": "ünïcode", "role": "admin"}},
		{Tool: "t"}, {Tool: "t", Arguments: json.RawMessage(`{"text":"` + strings.Repeat("x", 5000) + `"}`), Metadata: map[string]string{}}} {
		data, err := tools.MarshalJSON(c)
		if err != nil {
			t.Fatal(err)
		}
		if !sameDecoding(t, data) {
			t.Errorf("%s was decoded with reflection", data)
		}
	}
}

func FuzzCallDecoding(f *testing.F) {
	for _, data := range callDataInputs(rand.New(rand.NewPCG(9, 10)), 50) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameDecoding(t, data) })
}

// sameDecoding fails t unless decodeCallData decodes data as json.Unmarshal does, or
// declines (leaving the call as it was); it reports whether it decoded.
func sameDecoding(t *testing.T, data []byte) bool {
	t.Helper()
	want := Call{Tool: "subject_tool"}
	err := json.Unmarshal(data, &want)
	got := Call{Tool: "subject_tool"}
	if !decodeCallData(data, &got) {
		if got.Tool != "subject_tool" || got.Arguments != nil || got.Metadata != nil {
			t.Fatalf("%q: declined but changed the call: %#v", data, got)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%q: decoded %#v, but encoding/json refuses it: %v", data, got, err)
	}
	if got.Tool != want.Tool || !bytes.Equal(got.Arguments, want.Arguments) || (got.Arguments == nil) != (want.Arguments == nil) ||
		got.ArgumentsRef != want.ArgumentsRef || (got.Metadata == nil) != (want.Metadata == nil) || !maps.Equal(got.Metadata, want.Metadata) {
		t.Fatalf("%q:\nfast       %#v\nreflection %#v", data, got, want)
	}
	return true
}

// appendCompact writes what json.Compact writes, and refuses what it refuses.
func TestCompactMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, data := range callDataInputs(r, 5000) {
		for _, b := range [][]byte{data, mutate(r, data)} {
			var want bytes.Buffer
			wantErr := json.Compact(&want, b)
			got, err := appendCompact([]byte("x"), b)
			if (err == nil) != (wantErr == nil) || err == nil && !bytes.Equal(got, append([]byte("x"), want.Bytes()...)) {
				t.Fatalf("%q: compacted to %q (%v), json.Compact to %q (%v)", b, got, err, want.Bytes(), wantErr)
			}
		}
	}
}

// BenchmarkCallData compares the call's one-pass decoder with encoding/json on a
// typical call body; read the ratio of ns/op.
func BenchmarkCallData(b *testing.B) {
	data := []byte(`{"tool":"get_weather","arguments":{"city":"Oslo","units":"metric","days":3},"metadata":{"role":"user"}}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := Call{Tool: "get_weather"}
			if !decodeCallData(data, &c) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := Call{Tool: "get_weather"}
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestRunEventEncodingMatchesReflection(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		e := RunEvent{RunID: randString(r), Step: r.IntN(3) - 1}
		if r.IntN(2) == 0 {
			e.Tenant, e.Tool, e.CallID = randString(r), randString(r), randString(r)
		}
		if r.IntN(2) == 0 {
			e.At = randTime(r)
		}
		if r.IntN(3) > 0 {
			e.Detail = randJSON(r)
		}
		if r.IntN(2) == 0 {
			e.Executor, e.Attempt, e.Seq = randString(r), r.IntN(3), r.IntN(3)
		}
		b, err := marshalRunEvent(&e)
		sameAsReflection(t, e, b, err)
	}
}
