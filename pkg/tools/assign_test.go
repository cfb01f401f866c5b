package tools

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestKindDecoders holds each kind's decoder, alone, to what encoding/json does with the
// same JSON value: stored, left as it was for null, or refused.
func TestKindDecoders(t *testing.T) {
	cases := []struct {
		decode decodeFunc
		into   any // a new value of the destination type
		raw    string
	}{
		{decodeString, new(string), `"x"`},
		{decodeString, new(string), `null`},
		{decodeString, new(string), `1`},
		{decodeBool, new(bool), `true`},
		{decodeBool, new(bool), `"true"`},
		{decodeInt, new(int8), `127`},
		{decodeInt, new(int8), `128`},
		{decodeInt, new(int), `1.5`},
		{decodeInt, new(int), `null`},
		{decodeUint, new(uint16), `65535`},
		{decodeUint, new(uint), `-1`},
		{decodeFloat, new(float32), `1e39`},
		{decodeFloat, new(float64), `0.25`},
		{decodeInterface, new(any), `{"a":[1,"b",null]}`},
		{decodeInterface, new(any), `1e400`},
		{pointerDecoder(decodeInt), new(*int), `3`},
		{pointerDecoder(decodeInt), new(*int), `null`},
		{sliceDecoder(decodeString), new([]string), `["a","b"]`},
		{sliceDecoder(decodeString), new([]string), `["a",2]`},
		{mapDecoder(decodeBool), new(map[string]bool), `{"a":true}`},
		{mapDecoder(decodeBool), new(map[string]bool), `[true]`},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.into).Elem()
		want := reflect.New(typ)
		wantErr := json.Unmarshal([]byte(c.raw), want.Interface())
		_, v, err := parseArguments([]byte(`{"v":` + c.raw + `}`))
		if err != nil {
			t.Fatalf("%s: parse: %v", c.raw, err)
		}
		got := reflect.New(typ)
		gotErr := c.decode(got.Elem(), v["v"])
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%s into %s: error %v, encoding/json's %v", c.raw, typ, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !reflect.DeepEqual(got.Elem().Interface(), want.Elem().Interface()) {
			t.Errorf("%s into %s: %#v, encoding/json gives %#v", c.raw, typ, got.Elem().Interface(), want.Elem().Interface())
		}
	}
}
