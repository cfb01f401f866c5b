package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// registryBundle is a registry with every built-in, configured with a sandbox and a
// loopback HTTP server on the allowlist.
type registryBundle struct {
	reg     *tools.Registry
	sandbox string
	srv     *httptest.Server
}

func setupRegistry(t *testing.T) registryBundle {
	t.Helper()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a.txt"), "alpha")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("pong"))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	reg := tools.NewRegistry()
	err := Register(reg, Config{SandboxRoot: dir, HTTPAllowlist: []string{u.Host},
		Now: fixedClock, MaxSleep: time.Second})
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return registryBundle{reg: reg, sandbox: dir, srv: srv}
}

// call hydrates and runs one call as an executor would.
func (b registryBundle) call(t *testing.T, name, args string) tools.Outcome {
	t.Helper()
	c, err := b.reg.Hydrate(name, []byte(args))
	if err != nil {
		t.Fatalf("Hydrate(%s, %s): %v", name, args, err)
	}
	return c.Run(context.Background())
}

func TestRegisterServesEveryBuiltin(t *testing.T) {
	t.Parallel()
	b := setupRegistry(t)
	var names []string
	for _, d := range b.reg.Definitions() {
		names = append(names, d.Name)
		if !strings.Contains(string(d.Parameters), `"additionalProperties": false`) {
			t.Errorf("%s: schema does not set additionalProperties false", d.Name)
		}
		if d.NeedsApproval() != (d.Name == "write_file") {
			t.Errorf("%s: NeedsApproval = %v; only write_file needs approval", d.Name, d.NeedsApproval())
		}
		if !d.IsIdempotent() {
			t.Errorf("%s: not idempotent; every built-in is", d.Name)
		}
	}
	if !slices.Equal(names, Names()) {
		t.Fatalf("registered %v, want %v", names, Names())
	}

	tests := []struct{ name, args, want string }{
		{"calculator", `{"expression":"2 * (3 + 4)"}`, `{"expression":"2 * (3 + 4)","result":14}`},
		{"calculator", `"{\"expression\":\"1+1\"}"`, `{"expression":"1+1","result":2}`}, // arguments as a JSON string
		{"get_time", `{"timezone":"Europe/Paris"}`, `{"time":"2024-07-01T14:30:45+02:00","timezone":"Europe/Paris","utc_offset":"+02:00","unix":1719837045}`},
		{"echo", `{"value":{"k":[1,"two",null]}}`, `{"value":{"k":[1,"two",null]}}`},
		{"echo", `{"value":null}`, `{"value":null}`},
		{"sleep", `{"duration":"1ms"}`, `{"slept":"1ms"}`},
		{"read_file", `{"path":"a.txt"}`, `{"path":"a.txt","size":5,"content":"alpha","encoding":"text","truncated":false}`},
		{"list_dir", `{}`, `{"path":".","entries":[{"name":"a.txt","type":"file","size":5}],"truncated":false}`},
		{"write_file", `{"path":"b.txt","content":"beta"}`, `{"path":"b.txt","bytes":4}`},
	}
	for _, tt := range tests {
		o := b.call(t, tt.name, tt.args)
		if o.Err != nil || string(o.Output) != tt.want {
			t.Errorf("%s %s = %s, %v; want %s", tt.name, tt.args, o.Output, o.Err, tt.want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(b.sandbox, "b.txt")); string(got) != "beta" {
		t.Fatalf("write_file through the registry wrote %q", got)
	}
	o := b.call(t, "http_get", `{"url":"`+b.srv.URL+`/ping"}`)
	var res HTTPResult
	if o.Err != nil || json.Unmarshal(o.Output, &res) != nil || res.Body != "pong" || res.Status != 200 {
		t.Fatalf("http_get = %s, %v", o.Output, o.Err)
	}
}

func TestSchemasRefuseBadArguments(t *testing.T) {
	t.Parallel()
	b := setupRegistry(t)
	tests := []struct{ name, args, pointer string }{
		{"calculator", `{}`, ""},
		{"calculator", `{"expression":"1+1","extra":true}`, ""},
		{"calculator", `{"expression":42}`, "/expression"},
		{"calculator", `{"expression":"` + strings.Repeat("1", MaxExpressionLength+1) + `"}`, "/expression"},
		{"get_time", `{"timezone":"Europe/Paris; rm -rf"}`, "/timezone"},
		{"get_time", `{"format":"2006"}`, "/format"},
		{"echo", `{}`, ""},
		{"sleep", `{"duration":"soon"}`, "/duration"},
		{"sleep", `{"duration":5}`, "/duration"},
		{"http_get", `{"url":""}`, "/url"},
		{"http_get", `{"url":"http://x","method":"POST"}`, ""},
		{"read_file", `{"path":""}`, "/path"},
		{"list_dir", `{"path":["a"]}`, "/path"},
		{"write_file", `{"path":"x"}`, ""},
		{"write_file", `{"path":"x","content":"y","encoding":"hex"}`, "/encoding"},
		{"write_file", `{"path":"x","content":"y","create_dirs":"yes"}`, "/create_dirs"},
	}
	for _, tt := range tests {
		_, err := b.reg.Hydrate(tt.name, []byte(tt.args))
		var te *tools.Error
		if !errors.As(err, &te) || te.Code != tools.CodeInvalidInput {
			t.Errorf("Hydrate(%s, %.60s) = %v, want invalid_tool_input", tt.name, tt.args, err)
			continue
		}
		found := false
		for _, v := range te.Violations {
			found = found || v.Pointer == tt.pointer
		}
		if !found {
			t.Errorf("Hydrate(%s, %.60s) violations %+v, want one at %q", tt.name, tt.args, te.Violations, tt.pointer)
		}
	}
	if _, err := os.Stat(filepath.Join(b.sandbox, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused write_file call created its file")
	}
}

func TestToolFailuresKeepTheirCodesThroughTheRegistry(t *testing.T) {
	t.Parallel()
	b := setupRegistry(t)
	tests := []struct {
		name, args string
		code       tools.Code
	}{
		{"calculator", `{"expression":"1/0"}`, tools.CodeToolFailedPermanent},
		{"calculator", `{"expression":"1 +"}`, tools.CodeInvalidInput},
		{"get_time", `{"timezone":"Nowhere/City"}`, tools.CodeInvalidInput},
		{"sleep", `{"duration":"2s"}`, tools.CodeInvalidInput}, // over the configured 1s
		{"read_file", `{"path":"../etc/passwd"}`, tools.CodeInvalidInput},
		{"read_file", `{"path":"missing"}`, tools.CodeToolFailedPermanent},
		{"http_get", `{"url":"https://example.com/"}`, tools.CodeToolFailedPermanent},
	}
	for _, tt := range tests {
		o := b.call(t, tt.name, tt.args)
		if o.Err == nil || o.Err.Code != tt.code {
			t.Errorf("%s %s: err = %v, want %s", tt.name, tt.args, o.Err, tt.code)
			continue
		}
		var shown tools.ErrorOutput
		if err := json.Unmarshal(o.Output, &shown); err != nil || shown.Error == nil || shown.Error.Message == "" || shown.Error.Code == "" {
			t.Errorf("%s %s: output %s does not tell the model what went wrong", tt.name, tt.args, o.Output)
		}
	}
}

func TestRegisterLeavesOutWhatIsNotConfigured(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	if err := Register(reg, Config{}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	var names []string
	for _, d := range reg.Definitions() {
		names = append(names, d.Name)
	}
	if want := []string{"calculator", "get_time", "echo", "sleep"}; !slices.Equal(names, want) {
		t.Fatalf("registered %v, want %v", names, want)
	}
}

func TestRegisterRefuses(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	if err := Register(reg, Config{Enable: []string{"echo"}}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	err := Register(reg, Config{Enable: []string{"calculator", "echo"}})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"echo" is already registered`) {
		t.Fatalf("second Register = %v, want a clash on echo", err)
	}
	if _, ok := reg.Lookup("calculator"); ok {
		t.Fatal("a refused Register still registered calculator")
	}
	err = Register(reg, Config{SandboxRoot: "/definitely/not/here"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Register with a missing sandbox = %v", err)
	}
}
