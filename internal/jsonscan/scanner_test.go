package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/jsonscan"
)

// seeds are the corners of the grammar, and the odd cases models and networks produce:
// arguments as a JSON string, truncated text, huge numbers, lone surrogates, invalid
// UTF-8, deep nesting, duplicate keys.
var seeds = []string{
	`null`, `[]`, `""`, ` `, ``, `0`, `true`, `[{"query":"go"}]`, ` { "a" : [ 1 , 2 , {"b":null} ] } `, "\t[\n]\r",
	`"{\"query\":\"go\"}"`, `"\"{\\\"query\\\":1}\""`, `{"query":"go"`, `{"query":"go","query":"again"}`,
	`{"n":1e999999}`, `{"n":12345678901234567890123}`, `{"n":-0.0e-0}`, `{"i":9223372036854775808,"CASE":"c"}`,
	`{"query":"\ud800","a/b~c":true}`, "{\"query\":\"\xff\xfe\"}", `{"s":"<&>\u2028"}`,
	`"\u00e9\uD83D\uDE00\uDE00\u0000"`, `"\b\f\n\r\t\/\\\""`, "\"\xed\xa0\x80\"",
	strings.Repeat("[", 20000), strings.Repeat("[", 1000) + strings.Repeat("]", 1000),
	strings.Repeat("[", 1001) + strings.Repeat("]", 1001), `{"f":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`,
	`1.`, `-`, `01`, `1e`, `1e+`, `.5`, `+1`, `"\x"`, `"\u12"`, "\"\t\"", `[1,]`, `{"a" 1}`, `{"a":}`, `{,}`,
	`tru`, `nul`, `{"a":1}}`, `1 2`, `'x'`, `{1:2}`, `[1 2]`,
}

// FuzzParse holds Parse to encoding/json: the same texts are accepted and give the same
// values, except that nesting beyond MaxDepth is refused. Skip accepts exactly what
// Parse accepts, and refuses it in the same words.
func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := jsonscan.Parse(raw)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var want any
		wantErr := dec.Decode(&want)
		if wantErr == nil {
			if _, e := dec.Token(); e != io.EOF {
				wantErr = errors.New("trailing data")
			}
		}
		if wantErr == nil && jsonscan.Depth(raw) > jsonscan.MaxDepth {
			if err == nil || !strings.Contains(err.Error(), "nested too deeply") {
				t.Fatalf("%q: nested %d levels, Parse err = %v", raw, jsonscan.Depth(raw), err)
			}
			return
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: Parse err = %v, encoding/json err = %v", raw, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: Parse = %#v, encoding/json = %#v", raw, got, want)
		}

		s := jsonscan.NewScanner(raw)
		s.SkipSpace()
		text, skipErr := s.Skip()
		s.SkipSpace()
		if skipErr == nil && s.Pos() < len(raw) {
			skipErr = errors.New("trailing data")
		}
		if skipErr == nil && !bytes.Equal(text, bytes.TrimSpace(raw)) {
			t.Fatalf("%q: Skip read %q", raw, text)
		}
		if (skipErr == nil) != (err == nil) {
			t.Fatalf("%q: Skip err = %v, Parse err = %v", raw, skipErr, err)
		}
		var syn *jsonscan.SyntaxError
		if errors.As(skipErr, &syn) && skipErr.Error() != err.Error() {
			t.Fatalf("%q: Skip says %q, Parse %q", raw, skipErr, err)
		}
	})
}

// The errors say what was wrong and where, in words a model can act on.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"truncated", `{"query":"go"`, "unexpected end of input in object, want ',' or '}' at offset 13 (line 1, column 14)"},
		{"bad token", "{\n\"query\": go}", "unexpected 'g', want a value at offset 11 (line 2, column 10)"},
		{"trailing", `{} x`, "unexpected 'x' after the top-level value at offset 3 (line 1, column 4)"},
		{"key", `{1:2}`, "unexpected '1', want a string key at offset 1 (line 1, column 2)"},
		{"colon", `{"a" 1}`, "unexpected '1' after object key, want ':' at offset 5 (line 1, column 6)"},
		{"array", `[1 2]`, "unexpected '2' in array, want ',' or ']' at offset 3 (line 1, column 4)"},
		{"literal", `[tru]`, "unexpected ']' in literal true at offset 4 (line 1, column 5)"},
		{"fraction", `1.x`, "unexpected 'x' after decimal point, want a digit at offset 2 (line 1, column 3)"},
		{"exponent", `1e`, "unexpected end of input in exponent, want a digit at offset 2 (line 1, column 3)"},
		{"escape", `"\x"`, "invalid escape 'x' in string at offset 2 (line 1, column 3)"},
		{"unicode escape", `"\u12"`, "invalid \\u escape in string at offset 3 (line 1, column 4)"},
		{"control", "\"a\tb\"", "control character byte 0x09 in string at offset 2 (line 1, column 3)"},
		{"deep", strings.Repeat("[", 1001), "nested too deeply: more than 1000 levels at offset 1000 (line 1, column 1001)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := jsonscan.Parse([]byte(tc.in))
			var syn *jsonscan.SyntaxError
			if !errors.As(err, &syn) || err.Error() != tc.want {
				t.Errorf("Parse(%q) = %v, want %q", tc.in, err, tc.want)
			}
		})
	}
}

// A compact text read whole is not spaced; whitespace anywhere between tokens is seen.
func TestScannerSpaced(t *testing.T) {
	for in, spaced := range map[string]bool{`{"a":[1,"b c"]}`: false, `{"a": 1}`: true, "[1,\n2]": true, `[ ]`: true} {
		s := jsonscan.NewScanner([]byte(in))
		if _, err := s.Skip(); err != nil || s.Pos() != len(in) || s.Spaced() != spaced {
			t.Errorf("%q: err %v, pos %d, spaced %v; want spaced %v", in, err, s.Pos(), s.Spaced(), spaced)
		}
	}
}

func TestDepth(t *testing.T) {
	for in, want := range map[string]int{`1`: 0, `{}`: 1, `[{"a":[]}]`: 3, `"[[["`: 0, `["\"[",[]]`: 2} {
		if got := jsonscan.Depth([]byte(in)); got != want {
			t.Errorf("Depth(%q) = %d, want %d", in, got, want)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	data := []byte(`{"city":"Oslo","units":"metric","days":3,"tags":["a","b"],"near":{"lat":59.91,"lon":10.75}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonscan.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSkip(b *testing.B) {
	data := []byte(`{"city":"Oslo","units":"metric","days":3,"tags":["a","b"],"near":{"lat":59.91,"lon":10.75}}`)
	b.ReportAllocs()
	for b.Loop() {
		s := jsonscan.NewScanner(data)
		if _, err := s.Skip(); err != nil {
			b.Fatal(err)
		}
	}
}
