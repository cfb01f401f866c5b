package toolsfile_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// A tools-file entry's policyHook is asked by the executor before each call of the tool
// runs, whoever published the call (here a plain client, no planner): its deny is the
// call's one result, its modification runs instead (validated again), and a hook that
// does not answer in time denies unless its onError is allow. The tools append the
// arguments they run with to a log, so the test sees what ran.
func TestToolsFilePolicyHook(t *testing.T) {
	dir := t.TempDir()
	ranLog := filepath.Join(dir, "ran.log")
	tool := func(name, hook string) string {
		return `
  - name: ` + name + `
    safe: true
    parameters: {type: object, properties: {path: {type: string}}, required: [path], additionalProperties: false}
    command: {argv: [tee, -a, ` + ranLog + `]}
    policyHook: ` + hook
	}
	path := writeFile(t, "tools.yaml", "tools:"+
		tool("read_file", `{subject: hooks.files}`)+
		tool("strict_read", `{subject: hooks.silent, timeout: 100ms}`)+
		tool("lenient_read", `{subject: hooks.silent, timeout: 100ms, onError: allow}`))
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := toolsfile.Register(reg, file.Tools); err != nil {
		t.Fatal(err)
	}
	hooks := toolsfile.PolicyHooks(file.Tools)
	if len(hooks) != 3 || hooks["lenient_read"].OnError != "allow" || hooks["strict_read"].Timeout.D() != 100*time.Millisecond {
		t.Fatalf("policy hooks %+v", hooks)
	}

	fx := natstest.StartJetStream(t, events.Config{})
	// The hook: any NATS service; here a plain subscription.
	var mu sync.Mutex
	var asked []events.PolicyRequest
	sub, err := fx.NC.Subscribe("hooks.files", func(m *nats.Msg) {
		var req events.PolicyRequest
		_ = json.Unmarshal(m.Data, &req)
		mu.Lock()
		asked = append(asked, req)
		mu.Unlock()
		var args struct{ Path string }
		_ = json.Unmarshal(req.Arguments, &args)
		answer := `{"decision":"allow"}`
		switch args.Path {
		case "/etc/shadow":
			answer = `{"decision":"deny","reason":"system files are off limits"}`
		case "secrets.txt":
			answer = `{"decision":"modify","reason":"redirected to the public copy","arguments":{"path":"public.txt"}}`
		case "broken":
			answer = `{"decision":"modify","arguments":{"path":42}}`
		}
		_ = m.Respond([]byte(answer))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.NC.Flush(); err != nil { // the hook listens before anyone asks
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	silent, err := fx.NC.Subscribe("hooks.silent", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.NC.Flush(); err != nil { // the hook listens before anyone asks
		t.Fatal(err)
	}
	defer silent.Unsubscribe()

	opts := []executor.Option{executor.WithStreamConfig(fx.Cfg), executor.WithGracePeriod(time.Second), executor.WithLogger(zerolog.Nop())}
	for name, h := range hooks {
		opts = append(opts, executor.WithPolicyHook(name, h))
	}
	ex, err := executor.New(fx.Srv.Connect(), reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	exDone := make(chan error, 1)
	go func() { exDone <- ex.Run(ctx) }()
	defer func() { cancel(); <-exDone }()
	<-ex.Ready()
	c, err := client.New(fx.NC)
	if err != nil {
		t.Fatal(err)
	}
	call := func(tool, args string) events.Result {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		defer ccancel()
		res, err := c.Call(cctx, client.Request{Tool: tool, Arguments: json.RawMessage(args), RunID: "run-policy"})
		if err != nil && res.Status == "" { // a result that is not ok comes with its error
			t.Fatalf("call %s %s: %v", tool, args, err)
		}
		return res
	}
	ran := func() string {
		t.Helper()
		b, err := os.ReadFile(ranLog)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("deny", func(t *testing.T) {
		res := call("read_file", `{"path":"/etc/shadow"}`)
		if res.Status != events.StatusDenied || res.Error == nil || res.Error.Code != tools.CodeDenied ||
			!strings.Contains(res.Error.Message, "system files are off limits") || res.Attempts != 0 {
			t.Fatalf("result %+v (error %+v)", res, res.Error)
		}
		if p := res.Policy; p == nil || p.Decision != events.PolicyDeny || p.Hook != "hooks.files" || p.Level != events.PolicyLevelTool || p.Error != "" {
			t.Fatalf("policy record %+v", p)
		}
		if strings.Contains(ran(), "shadow") {
			t.Fatalf("the denied call ran: %s", ran())
		}
		mu.Lock()
		req := asked[len(asked)-1]
		mu.Unlock()
		if req.Level != events.PolicyLevelTool || req.Tool != "read_file" || req.RunID != "run-policy" || req.CallID == "" ||
			string(req.Arguments) != `{"path":"/etc/shadow"}` || !req.Validated {
			t.Fatalf("the hook was asked %+v", req)
		}
	})
	t.Run("modify", func(t *testing.T) {
		res := call("read_file", `{"path":"secrets.txt"}`)
		if res.Status != events.StatusOK || !strings.Contains(string(res.Output), "public.txt") {
			t.Fatalf("result %s: %s", res.Status, res.Output)
		}
		p := res.Policy
		if p == nil || p.Decision != events.PolicyModify || p.Reason != "redirected to the public copy" ||
			string(p.ArgumentsOriginal) != `{"path":"secrets.txt"}` || string(p.ArgumentsModified) != `{"path":"public.txt"}` {
			t.Fatalf("policy record %+v", p)
		}
		if log := ran(); !strings.Contains(log, "public.txt") || strings.Contains(log, "secrets.txt") {
			t.Fatalf("ran with %q", log)
		}
	})
	t.Run("modify into invalid arguments", func(t *testing.T) {
		before := ran()
		res := call("read_file", `{"path":"broken"}`)
		if res.Status != events.StatusInvalid || res.Error == nil || res.Error.Code != tools.CodeInvalidInput ||
			len(res.Error.Violations) == 0 || !strings.Contains(res.Error.Message, "policy hook hooks.files modified its arguments") {
			t.Fatalf("result %+v (error %+v)", res, res.Error)
		}
		if ran() != before {
			t.Fatalf("the refused call ran: %s", ran())
		}
	})
	t.Run("timeout denies by default", func(t *testing.T) {
		before := ran()
		res := call("strict_read", `{"path":"a.txt"}`)
		if res.Status != events.StatusDenied || !strings.Contains(res.Error.Message, "its onError is deny") ||
			res.Policy == nil || res.Policy.Error == "" {
			t.Fatalf("result %+v (error %+v, policy %+v)", res, res.Error, res.Policy)
		}
		if ran() != before {
			t.Fatalf("the call ran: %s", ran())
		}
	})
	t.Run("timeout with onError allow", func(t *testing.T) {
		res := call("lenient_read", `{"path":"b.txt"}`)
		if res.Status != events.StatusOK || res.Policy == nil || res.Policy.Decision != events.PolicyAllow || res.Policy.Error == "" {
			t.Fatalf("result %s %s (policy %+v)", res.Status, res.Output, res.Policy)
		}
		if !strings.Contains(ran(), "b.txt") {
			t.Fatalf("the call did not run: %s", ran())
		}
	})
}

// A policy hook in a tools file is checked like the rest of the file.
func TestToolsFilePolicyHookIsChecked(t *testing.T) {
	for hook, want := range map[string]string{
		`{subject: toolfleet.call.x}`:         "reserved",
		`{subject: "hooks.*"}`:                "not a literal NATS subject",
		`{subject: hooks.p, onError: maybe}`:  "onError must be deny or allow",
		`{subject: hooks.p, timeout: 1h}`:     "timeout must be between",
		`{subject: hooks.p, unknownField: 1}`: "unknown field",
	} {
		path := writeFile(t, "tools.yaml", `
tools:
  - name: t
    parameters: {type: object}
    command: {argv: [cat]}
    policyHook: `+hook)
		if _, err := toolsfile.LoadFile(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("policyHook %s: error %v, want %q", hook, err, want)
		}
	}
}
