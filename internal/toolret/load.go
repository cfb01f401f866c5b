package toolret

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// Folders are the benchmark folders, each evaluated on its own.
var Folders = []string{"toollens", "sealtools"}

// Benchmark is one folder: its tools as definitions (in file order) and its queries.
type Benchmark struct {
	Name  string
	Tools []tools.Definition
	// Full is the README's "full" text view of each tool (same order as Tools), used by
	// PlainBM25.
	Full    []string
	Queries []Query
	// byName maps a definition name back to the benchmark's tool id.
	byName map[string]string
	byID   map[string]string // the reverse, made on first use
}

// Query is one request and the ids of its relevant tools.
type Query struct {
	ID       string   `json:"id"`
	Query    string   `json:"query"`
	Relevant []string `json:"relevant"`
}

// ToolID returns the benchmark id of the tool with the given definition name.
func (b *Benchmark) ToolID(name string) (string, bool) {
	id, ok := b.byName[name]
	return id, ok
}

// Load reads folder (toollens or sealtools) of the toolret directory dir.
func Load(dir, folder string) (*Benchmark, error) {
	b := &Benchmark{Name: folder, byName: map[string]string{}}
	var conv func(json.RawMessage) (id string, d tools.Definition, full string, err error)
	switch folder {
	case "toollens":
		conv = toolLensTool
	case "sealtools":
		conv = sealTool
	default:
		return nil, fmt.Errorf("toolret: unknown folder %q (want toollens or sealtools)", folder)
	}
	err := eachLine(filepath.Join(dir, folder, "tools.jsonl"), func(line []byte) error {
		id, d, full, err := conv(line)
		if err != nil {
			return err
		}
		if !tools.NamePattern.MatchString(d.Name) {
			return fmt.Errorf("tool %s: made invalid name %q", id, d.Name)
		}
		if prev, dup := b.byName[d.Name]; dup {
			return fmt.Errorf("tools %s and %s both named %q", prev, id, d.Name)
		}
		b.byName[d.Name] = id
		b.Tools = append(b.Tools, d)
		b.Full = append(b.Full, full)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachLine(filepath.Join(dir, folder, "queries.jsonl"), func(line []byte) error {
		var q Query
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		if len(q.Relevant) == 0 {
			return fmt.Errorf("query %s has no relevant tool", q.ID)
		}
		b.Queries = append(b.Queries, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func eachLine(path string, f func([]byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("toolret: %w", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for sc.Scan() {
		n++
		if err := f(sc.Bytes()); err != nil {
			return fmt.Errorf("toolret: %s line %d: %w", path, n, err)
		}
	}
	return sc.Err()
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// toolName makes a valid tool name from parts and a unique suffix.
func toolName(suffix string, parts ...string) string {
	base := strings.Trim(nonName.ReplaceAllString(strings.Join(parts, "_"), "_"), "_")
	suffix = nonName.ReplaceAllString(suffix, "_")
	if suffix != "" {
		if max := 64 - len(suffix) - 1; len(base) > max {
			base = strings.TrimRight(base[:max], "_")
		}
		return base + "_" + suffix
	}
	if len(base) > 64 {
		base = base[:64]
	}
	return base
}

type schemaProp struct {
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
}

type objectSchema struct {
	Type       string                     `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required,omitempty"`
}

// jsonType maps the benchmarks' type names to JSON Schema types.
func jsonType(t string) string {
	switch strings.ToLower(t) {
	case "int", "integer":
		return "integer"
	case "float", "number":
		return "number"
	case "bool", "boolean":
		return "boolean"
	}
	return "string"
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain maps and strings are marshalled here
	}
	return b
}

// shapeSchema turns an example-like return shape ({"name": "str", "items": [{...}]}) into a
// JSON Schema with the same property names.
func shapeSchema(v any) json.RawMessage {
	switch x := v.(type) {
	case map[string]any:
		s := objectSchema{Type: "object", Properties: map[string]json.RawMessage{}}
		for k, e := range x {
			s.Properties[k] = shapeSchema(e)
		}
		return mustJSON(s)
	case []any:
		if len(x) > 0 {
			return mustJSON(map[string]json.RawMessage{"type": mustJSON("array"), "items": shapeSchema(x[0])})
		}
		return mustJSON(map[string]string{"type": "array"})
	case string:
		return mustJSON(schemaProp{Type: jsonType(x)})
	}
	return mustJSON(map[string]string{})
}

func toolLensTool(line json.RawMessage) (string, tools.Definition, string, error) {
	var t struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Parameters  struct {
			Required, Optional []struct{ Name, Type, Description string }
		} `json:"parameters"`
		ToolName     string `json:"tool_name"`
		Category     string `json:"category"`
		ReturnSchema any    `json:"return_schema"`
		Text         string `json:"text"`
	}
	if err := json.Unmarshal(line, &t); err != nil {
		return "", tools.Definition{}, "", err
	}
	params := objectSchema{Type: "object", Properties: map[string]json.RawMessage{}}
	for i, list := range [][]struct{ Name, Type, Description string }{t.Parameters.Required, t.Parameters.Optional} {
		for _, p := range list {
			params.Properties[p.Name] = mustJSON(schemaProp{Type: jsonType(p.Type), Description: p.Description})
			if i == 0 {
				params.Required = append(params.Required, p.Name)
			}
		}
	}
	d := tools.Definition{Type: "function", Name: toolName(t.ID, t.ToolName, t.Name),
		Description: t.Description, Parameters: mustJSON(params), Safe: true}
	if t.Category != "" {
		d.Tags = []string{t.Category}
	}
	if m, ok := t.ReturnSchema.(map[string]any); ok && len(m) > 0 {
		d.ResponseSchema = shapeSchema(m)
	}
	return t.ID, d, t.Text, nil
}

func sealTool(line json.RawMessage) (string, tools.Definition, string, error) {
	var t struct {
		ID          string                `json:"id"`
		Name        string                `json:"name"`
		Description string                `json:"description"`
		Parameters  map[string]schemaProp `json:"parameters"`
		Required    []string              `json:"required"`
		Responses   map[string]schemaProp `json:"responses"`
		Field       string                `json:"field"`
	}
	if err := json.Unmarshal(line, &t); err != nil {
		return "", tools.Definition{}, "", err
	}
	names := make([]string, 0, len(t.Parameters))
	for n := range t.Parameters {
		names = append(names, n)
	}
	// Sorted for a deterministic schema; the README's full view is a bag of words, so the
	// order does not change its figures.
	sort.Strings(names)
	params := objectSchema{Type: "object", Properties: map[string]json.RawMessage{}, Required: t.Required}
	full := []string{t.Name, t.Description}
	for _, n := range names {
		p := t.Parameters[n]
		params.Properties[n] = mustJSON(schemaProp{Type: jsonType(p.Type), Description: p.Description})
		full = append(full, n, p.Description)
	}
	name := t.Name
	if !tools.NamePattern.MatchString(name) {
		name = toolName("", name)
	}
	d := tools.Definition{Type: "function", Name: name, Description: t.Description,
		Parameters: mustJSON(params), Safe: true}
	if len(t.Responses) > 0 {
		resp := objectSchema{Type: "object", Properties: map[string]json.RawMessage{}}
		for n, p := range t.Responses {
			resp.Properties[n] = mustJSON(schemaProp{Type: jsonType(p.Type), Description: p.Description})
		}
		d.ResponseSchema = mustJSON(resp)
	}
	for _, f := range strings.Split(t.Field, "/") {
		if f = strings.TrimSpace(f); f != "" {
			d.Tags = append(d.Tags, f)
		}
	}
	return t.ID, d, strings.Join(full, " "), nil
}
