package toolsfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ErrInvalidFile is wrapped by every error about the content of a tools file.
var ErrInvalidFile = errors.New("invalid tools file")

// Load reads a tools file: YAML for .yaml and .yml, JSON for .json. It checks every tool
// and reports every problem at once (joined errors naming the file and the tool): an
// unknown field, no runner or two, a name the providers refuse, a duplicate name, a
// missing schema without allowNoSchema and a noSchemaMode, a program that cannot be found.
// Relative paths in a command are resolved against the file's directory.
//
// A file that declares mcpServers is refused here: its tools exist only once the servers
// are connected. Use [LoadFile] and [StartMCP].
func Load(path string) ([]Spec, error) {
	f, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	if len(f.MCPServers) > 0 {
		return nil, fmt.Errorf("%w %s: it declares mcpServers, whose tools are known only once connected: load it with LoadFile and start them with StartMCP", ErrInvalidFile, path)
	}
	return f.Tools, nil
}

// File is a whole tools file: its tools and the MCP servers whose tools it imports.
type File struct {
	Tools      []Spec
	MCPServers []MCPServer
}

// Unconfined names what of f runs as the executor's own user with nothing taken away:
// the command tools ("tool NAME") neither sandboxed nor given runAs, and the stdio MCP
// servers ("MCP server NAME"). Under a root executor they hold every power root has;
// the executor warns of them.
func (f *File) Unconfined() []string {
	var out []string
	for _, s := range f.Tools {
		if c := s.Command; c != nil && c.policy == nil && c.RunAs == nil {
			out = append(out, "tool "+s.Definition.Name)
		}
	}
	for _, m := range f.MCPServers {
		if m.Command != nil {
			out = append(out, "MCP server "+m.Name)
		}
	}
	return out
}

// Sandboxed names the command tools of f that run in the sandbox (read-only tools, the
// sandbox option): they start through the sandbox launcher ([sandbox.Launcher]).
func (f *File) Sandboxed() []string {
	var out []string
	for _, s := range f.Tools {
		if c := s.Command; c != nil && c.policy != nil {
			out = append(out, s.Definition.Name)
		}
	}
	return out
}

// LoadFile reads a tools file as [Load] does, with its mcpServers: each is checked (a
// name, one transport, the program or URL, the secrets its headers use, the policy) and
// returned unconnected; [StartMCP] connects them.
func LoadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tools file: %w", err)
	}
	var doc []byte
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".json":
		doc = data
	case ".yaml", ".yml":
		if doc, err = yamlToJSON(data); err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrInvalidFile, path, err)
		}
	default:
		return nil, fmt.Errorf("%w %s: unknown extension %q; use .yaml, .yml or .json", ErrInvalidFile, path, ext)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("tools file %s: %w", path, err)
	}
	return parse(doc, path, base)
}

// parse decodes the JSON form of a tools file: {"tools": [ {definition fields, command |
// http}, ... ], "mcpServers": [ ... ]}.
func parse(doc []byte, name, base string) (*File, error) {
	var file struct {
		Tools      []json.RawMessage `json:"tools"`
		MCPServers []json.RawMessage `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%w %s: %v (the file is an object with a \"tools\" list and/or an \"mcpServers\" list)", ErrInvalidFile, name, err)
	}
	if file.Tools == nil && file.MCPServers == nil {
		return nil, fmt.Errorf("%w %s: no \"tools\" list (nor \"mcpServers\")", ErrInvalidFile, name)
	}
	var (
		out  File
		errs []error
		seen = make(map[string]string)
	)
	for i, raw := range file.Tools {
		src := fmt.Sprintf("%s: tool %d", name, i+1)
		s, problems := parseSpec(raw, base)
		if s.Definition.Name != "" {
			src = fmt.Sprintf("%s (%s)", src, s.Definition.Name)
			if first, dup := seen[s.Definition.Name]; dup {
				problems = append(problems, fmt.Sprintf("name %q is already used by %s", s.Definition.Name, first))
			} else {
				seen[s.Definition.Name] = src
			}
		}
		s.Source = src
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("%w %s: %s", ErrInvalidFile, src, p))
		}
		out.Tools = append(out.Tools, s)
	}
	errs = append(errs, compositeCycles(out.Tools)...)
	servers := make(map[string]string)
	for i, raw := range file.MCPServers {
		src := fmt.Sprintf("%s: mcpServers %d", name, i+1)
		var m MCPServer
		var problems []string
		if err := strictDecode(raw, &m); err != nil {
			problems = []string{err.Error()}
		} else {
			if m.Name != "" {
				src = fmt.Sprintf("%s (%s)", src, m.Name)
				if first, dup := servers[m.Name]; dup {
					problems = append(problems, fmt.Sprintf("name %q is already used by %s", m.Name, first))
				}
				servers[m.Name] = src
			}
			problems = append(problems, m.check(base)...)
		}
		m.Source = src
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("%w %s: %s", ErrInvalidFile, src, p))
		}
		out.MCPServers = append(out.MCPServers, m)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &out, nil
}

// definitionFields are the JSON names of tools.Definition, the fields a tool may have
// beside its runner.
var definitionFields = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[tools.Definition]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			m[name] = true
		}
	}
	return m
}()

// parseSpec decodes one tool and lists what is wrong with it. The definition is decoded
// from the tool's own bytes, so that parameters stay byte for byte as written (in a
// JSON file).
func parseSpec(raw json.RawMessage, base string) (Spec, []string) {
	var s Spec
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return s, []string{"a tool is an object: " + err.Error()}
	}
	var problems []string
	_, composite := fields["composite"]
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		switch {
		case composite && !compositeFields[k] && (definitionFields[k] || k == "command" || k == "http"):
			problems = append(problems, fmt.Sprintf("field %q does not belong in a composite: its schema and idempotence come from its sub-tools, which run themselves", k))
		case !definitionFields[k] && k != "command" && k != "http" && k != "policyHook" && k != "composite" && k != "callbacks":
			problems = append(problems, fmt.Sprintf("unknown field %q", k))
		}
	}
	if err := json.Unmarshal(raw, &s.Definition); err != nil {
		problems = append(problems, err.Error())
	}
	if v, ok := fields["retry"]; ok { // strictly: a misspelt rule must not be ignored
		if err := strictDecode(v, new(tools.RetryPolicy)); err != nil {
			problems = append(problems, "retry: "+err.Error())
		}
	}
	_, s.safeDeclared = fields["safe"]
	if v, ok := fields["composite"]; ok {
		s.Composite = new(Composite)
		if err := strictDecode(v, s.Composite); err != nil {
			problems = append(problems, "composite: "+err.Error()+` (composite is {"tools": [TOOL, ...]})`)
		}
	}
	if v, ok := fields["callbacks"]; ok {
		s.Callbacks = new(Callbacks)
		if err := strictDecode(v, s.Callbacks); err != nil {
			problems = append(problems, "callbacks: "+err.Error())
		}
	}
	if v, ok := fields["command"]; ok {
		s.Command = new(Command)
		if err := strictDecode(v, s.Command); err != nil {
			problems = append(problems, "command: "+err.Error())
		}
	}
	if v, ok := fields["http"]; ok {
		s.HTTP = new(HTTP)
		if err := strictDecode(v, s.HTTP); err != nil {
			problems = append(problems, "http: "+err.Error())
		}
	}
	if v, ok := fields["policyHook"]; ok {
		s.PolicyHook = new(events.Hook)
		if err := strictDecode(v, s.PolicyHook); err != nil {
			problems = append(problems, "policyHook: "+err.Error())
		} else if err := events.CheckPolicyHook("policyHook", *s.PolicyHook); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return s, problems
	}
	return s, s.check(base)
}

func strictDecode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// yamlToJSON converts a YAML document to JSON, so that both formats share one decoder
// (and one set of field names and checks).
func yamlToJSON(data []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// jsonable turns the maps yaml.v3 produces into JSON objects; a key that is not a
// string is an error.
func jsonable(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			x[k] = j
		}
		return x, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("key %v is not a string", k)
			}
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			m[ks] = j
		}
		return m, nil
	case []any:
		for i, e := range x {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			x[i] = j
		}
		return x, nil
	}
	return v, nil
}

// PolicyHooks returns the policy hooks the specs declare, by tool name (nil when none
// does): the executor serving the tools must ask them (executor.WithPolicyHook).
func PolicyHooks(specs []Spec) map[string]events.Hook {
	var out map[string]events.Hook
	for _, s := range specs {
		if s.PolicyHook == nil {
			continue
		}
		if out == nil {
			out = map[string]events.Hook{}
		}
		out[s.Definition.Name] = *s.PolicyHook
	}
	return out
}
