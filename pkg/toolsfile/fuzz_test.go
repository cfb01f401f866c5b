package toolsfile

import (
	"errors"
	"testing"
)

// FuzzParse asserts that any document yields specs and servers or an ErrInvalidFile error, never a
// panic, and that accepted specs have exactly one runner (servers one transport).
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
		`{"mcpServers":[{"name":"fs","command":{"argv":["true"]},"tools":{"x":{"safe":true}}}]}`,
		`{"mcpServers":[{"name":"w","http":{"url":"http://x/mcp","headers":{"A":"${secret:T}"}},"secrets":[{"name":"T"}]}]}`,
		`{"mcpServers":[{"name":"w"},{"name":"w","http":{},"command":{}}]}`,
	} {
		f.Add([]byte(s))
	}
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, doc []byte) {
		file, err := parse(doc, "fuzz.json", base)
		if err != nil {
			if !errors.Is(err, ErrInvalidFile) {
				t.Fatalf("parse error %v does not wrap ErrInvalidFile", err)
			}
			return
		}
		for _, s := range file.Tools {
			if (s.Command == nil) == (s.HTTP == nil) {
				t.Fatalf("accepted spec %+v without exactly one runner", s)
			}
		}
		for _, m := range file.MCPServers {
			if (m.Command == nil) == (m.HTTP == nil) {
				t.Fatalf("accepted MCP server %+v without exactly one transport", m)
			}
		}
	})
}
