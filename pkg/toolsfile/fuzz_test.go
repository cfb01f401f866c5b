package toolsfile

import (
	"errors"
	"testing"
)

// FuzzParse asserts that any document yields specs or an ErrInvalidFile error, never a
// panic, and that accepted specs have exactly one runner.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"tools":[]}`,
		`{"tools":[{"name":"a","parameters":{"type":"object"},"http":{"url":"http://x"}}]}`,
		`{"tools":[{"name":"a","allowNoSchema":true,"noSchemaMode":"full","command":{"argv":["true"]}}]}`,
		`{"tools":[{"name":"a","command":{"argv":[]},"http":{}}]}`,
		`{"tools":[null, 1, "x", []]}`,
		`{"tools":{}}`,
		`{"tools":[{"timeout":"1x","retry":{"maxRetries":-1}}]}`,
		`[`,
	} {
		f.Add([]byte(s))
	}
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, doc []byte) {
		specs, err := parse(doc, "fuzz.json", base)
		if err != nil {
			if !errors.Is(err, ErrInvalidFile) {
				t.Fatalf("parse error %v does not wrap ErrInvalidFile", err)
			}
			return
		}
		for _, s := range specs {
			if (s.Command == nil) == (s.HTTP == nil) {
				t.Fatalf("accepted spec %+v without exactly one runner", s)
			}
		}
	})
}
