package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const yamlFile = `
tools:
  - name: add
    description: Add two numbers.
    safe: true
    timeout: 5s
    parameters:
      type: object
      properties:
        a: {type: number}
        b: {type: number}
      required: [a, b]
      additionalProperties: false
    command:
      argv: [./bin/add.sh, --verbose]
      passEnv: [LANG]
      env: {MODE: fast}
      timeout: 2s
  - name: lookup
    parameters: {type: object}
    idempotent: false
    http:
      url: https://api.example.com/lookup
      method: put
      passEnv: [API_TOKEN]
      headers: {Authorization: "Bearer ${API_TOKEN}"}
  - name: free_form
    allowNoSchema: true
    noSchemaMode: human-approval
    command: {argv: [sh, -c, 'cat']}
`

func TestLoadYAML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, filepath.Join(dir, "bin"), "add.sh", `cat`)
	specs, err := Load(writeFile(t, dir, "tools.yaml", yamlFile))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(specs) != 3 {
		t.Fatalf("Load = %d specs, want 3", len(specs))
	}
	add, lookup, free := specs[0], specs[1], specs[2]
	if add.Definition.Name != "add" || !add.Definition.Safe || add.Definition.Timeout.D().String() != "5s" || add.HTTP != nil {
		t.Fatalf("add = %+v", add.Definition)
	}
	var schema map[string]any
	if err := json.Unmarshal(add.Definition.Parameters, &schema); err != nil || schema["additionalProperties"] != false {
		t.Fatalf("add parameters = %s, %v", add.Definition.Parameters, err)
	}
	c := add.Command
	if c.Argv[0] != filepath.Join(dir, "bin", "add.sh") || c.Argv[1] != "--verbose" || c.Dir != dir ||
		c.Env["MODE"] != "fast" || c.Timeout.D().String() != "2s" || c.PassEnv[0] != "LANG" {
		t.Fatalf("add command = %+v; want the program and dir resolved against the file's directory", c)
	}
	if lookup.Definition.IsIdempotent() || lookup.HTTP.Method != "PUT" || lookup.HTTP.Headers["Authorization"] != "Bearer ${API_TOKEN}" {
		t.Fatalf("lookup = %+v %+v", lookup.Definition, lookup.HTTP)
	}
	if !free.Definition.AllowNoSchema || !filepath.IsAbs(free.Command.Argv[0]) || !strings.HasSuffix(free.Command.Argv[0], "/sh") {
		t.Fatalf("free_form = %+v %+v; want sh found in PATH", free.Definition, free.Command)
	}
	if !strings.Contains(add.Source, "tools.yaml: tool 1 (add)") {
		t.Fatalf("source = %q", add.Source)
	}

	// The loaded spec runs: the relative program was resolved.
	out, err := add.Run(context.Background(), json.RawMessage(`{"a":1,"b":2}`))
	if err != nil || string(out.(json.RawMessage)) != `{"a":1,"b":2}` {
		t.Fatalf("Run = %s, %v", out, err)
	}
}

func TestLoadJSONKeepsParametersByteForByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	params := `{ "type": "object",  "properties": { "q": { "type": "string" } } }`
	p := writeFile(t, dir, "tools.JSON", `{"tools": [{"name": "q", "parameters": `+params+`, "command": {"argv": ["true"]}}]}`)
	specs, err := Load(p)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := string(specs[0].Definition.Parameters); got != params {
		t.Fatalf("parameters = %s, want %s", got, params)
	}
}

func TestLoadRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script(t, dir, "ok.sh", "cat")
	if err := os.WriteFile(filepath.Join(dir, "plain.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	const schema = `parameters: {type: object}`
	tests := []struct {
		name, file, content string
		fragments           []string
	}{
		{"unknown extension", "tools.toml", `tools = []`, []string{`unknown extension ".toml"`}},
		{"malformed YAML", "t.yaml", "tools: [\n  - name: x\n   bad", []string{"yaml"}},
		{"malformed JSON", "t.json", `{"tools": [`, []string{"unexpected EOF"}},
		{"no tools list", "t.yaml", `other: 1`, []string{`unknown field "other"`}},
		{"empty file", "t.yaml", ``, []string{`no "tools" list`}},
		{"unknown tool field", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh]}, colour: red}", []string{`tool 1 (x): unknown field "colour"`}},
		{"misspelled definition field", "t.yaml", "tools:\n  - {name: x, paramters: {type: object}, command: {argv: [./ok.sh]}}", []string{`unknown field "paramters"`}},
		{"unknown command field", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], shell: true}}", []string{`command: json: unknown field "shell"`}},
		{"no runner", "t.yaml", "tools:\n  - {name: x, " + schema + "}", []string{"no runner: add command, http or composite"}},
		{"both runners", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh]}, http: {url: 'http://a'}}", []string{"both command and http"}},
		{"bad name", "t.yaml", "tools:\n  - {name: 'has space', " + schema + ", command: {argv: [./ok.sh]}}", []string{`name "has space" must match`}},
		{"missing name", "t.yaml", "tools:\n  - {" + schema + ", command: {argv: [./ok.sh]}}", []string{`tool 1: name "" must match`}},
		{"missing schema", "t.yaml", "tools:\n  - {name: x, command: {argv: [./ok.sh]}}", []string{"no parameters", "allowNoSchema"}},
		{"allowNoSchema without a mode", "t.yaml", "tools:\n  - {name: x, allowNoSchema: true, command: {argv: [./ok.sh]}}", []string{"needs a noSchemaMode"}},
		{"read-only mode, not declared read-only", "t.yaml", "tools:\n  - {name: x, allowNoSchema: true, noSchemaMode: read-only, command: {argv: [./ok.sh]}}", []string{`tool 1 (x): noSchemaMode read-only needs`, `"capabilities": ["read-only"]`}},
		{"schema not an object", "t.json", `{"tools":[{"name":"x","parameters":"string","command":{"argv":["./ok.sh"]}}]}`, []string{"JSON Schema object"}},
		{"wrong type", "t.yaml", "tools:\n  - {type: retrieval, name: x, " + schema + ", command: {argv: [./ok.sh]}}", []string{`type "retrieval"`}},
		{"duplicate name", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh]}}\n  - {name: x, " + schema + ", command: {argv: [./ok.sh]}}", []string{`tool 2 (x): name "x" is already used by`}},
		{"empty argv", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: []}}", []string{"argv needs at least the program"}},
		{"missing program", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./nope.sh]}}", []string{"program ./nope.sh"}},
		{"program not in PATH", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [no-such-program-here]}}", []string{"is not in PATH"}},
		{"program not executable", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./plain.txt]}}", []string{"is not executable"}},
		{"missing dir", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], dir: nowhere}}", []string{"dir nowhere is not a directory"}},
		{"env passed and set", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], passEnv: [A], env: {A: b}}}", []string{"A is both passed through and set"}},
		{"bad env name", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], passEnv: ['A-B']}}", []string{`passEnv "A-B"`}},
		{"bad duration", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], timeout: soon}}", []string{`duration "soon"`}},
		{"http URL not absolute", "t.yaml", "tools:\n  - {name: x, " + schema + ", http: {url: /relative}}", []string{"absolute http or https URL"}},
		{"http DELETE", "t.yaml", "tools:\n  - {name: x, " + schema + ", http: {url: 'http://a', method: DELETE}}", []string{`method "DELETE"`, "GET or HEAD"}},
		{"sandbox path missing", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], sandbox: {read: [nowhere], write: [/no/such/dir]}}}",
			[]string{"sandbox: read path nowhere does not exist", "sandbox: write path /no/such/dir does not exist"}},
		{"sandbox unknown field", "t.yaml", "tools:\n  - {name: x, " + schema + ", command: {argv: [./ok.sh], sandbox: {net: true}}}", []string{`unknown field "net"`}},
		{"read-only tool granted writes", "t.yaml", "tools:\n  - {name: x, allowNoSchema: true, noSchemaMode: read-only, capabilities: [read-only], command: {argv: [./ok.sh], sandbox: {write: [.], network: true}}}",
			[]string{"read-only", "cannot be granted write paths", "cannot be granted the network"}},
		{"header env not allowed", "t.yaml", "tools:\n  - {name: x, " + schema + ", http: {url: 'http://a', headers: {Authorization: 'Bearer ${TOKEN}'}}}", []string{"references ${TOKEN}, which is not in passEnv"}},
		{"a tool that is not an object", "t.yaml", "tools:\n  - just a string", []string{"a tool is an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sub := t.TempDir()
			for _, f := range []string{"ok.sh", "plain.txt"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				mode := os.FileMode(0o644)
				if f == "ok.sh" {
					mode = 0o755
				}
				if err := os.WriteFile(filepath.Join(sub, f), b, mode); err != nil {
					t.Fatal(err)
				}
			}
			p := writeFile(t, sub, tt.file, tt.content)
			specs, err := Load(p)
			if err == nil {
				t.Fatalf("Load = %+v, want an error", specs)
			}
			for _, f := range tt.fragments {
				if !strings.Contains(err.Error(), f) {
					t.Fatalf("Load error = %v\nwant it to mention %q", err, f)
				}
			}
			if tt.name != "unknown extension" && !errors.Is(err, ErrInvalidFile) {
				t.Fatalf("Load error = %v, want ErrInvalidFile", err)
			}
			if !strings.Contains(err.Error(), tt.file) {
				t.Fatalf("Load error = %v, want it to name the file", err)
			}
		})
	}
}

func TestLoadReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := writeFile(t, dir, "t.yaml", "tools:\n  - {name: 'a b', command: {argv: [./missing]}}\n  - {name: ok, parameters: {type: object}}\n")
	_, err := Load(p)
	if err == nil {
		t.Fatal("Load succeeded")
	}
	for _, f := range []string{`tool 1 (a b): name "a b"`, "tool 1 (a b): no parameters", "tool 1 (a b): command: program ./missing", "tool 2 (ok): no runner"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error lacks %q:\n%v", f, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v", err)
	}
}
