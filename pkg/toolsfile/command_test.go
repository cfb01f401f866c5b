package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// script writes an executable #!/bin/sh script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func commandSpec(name string, c *Command) *Spec {
	return &Spec{Definition: tools.Definition{Name: name}, Command: c}
}

func wantToolError(t *testing.T, err error, code tools.Code, fragment string) *tools.Error {
	t.Helper()
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	if !strings.Contains(te.Message, fragment) {
		t.Fatalf("error message %q does not mention %q", te.Message, fragment)
	}
	return te
}

func TestCommandStdinStdoutContract(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, body, args, want string
	}{
		{"JSON in, JSON out", "cat", `{"a":[1,2],"b":"x"}`, `{"a":[1,2],"b":"x"}`},
		{"JSON with surrounding whitespace", `printf '  {"n": 1}\n\n'`, `{}`, `{"n": 1}`},
		{"a JSON scalar", "echo 42", `{}`, `42`},
		{"plain text becomes a JSON string", "echo 'hello, world'", `{}`, `"hello, world"`},
		{"multi-line text keeps inner newlines", `printf 'a\nb\n'`, `{}`, `"a\nb"`},
		{"half a JSON object is text", `printf '{"a":'`, `{}`, `"{\"a\":"`},
		{"no output is null", "true", `{}`, `null`},
		{"reads its arguments", `read line; case "$line" in *'"x":7'*) echo '"saw x"';; *) echo '"missed"';; esac`, `{"x":7}`, `"saw x"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := script(t, dir, "s"+strconv.Itoa(i), tt.body)
			out, err := commandSpec("t", &Command{Argv: []string{p}}).Run(context.Background(), json.RawMessage(tt.args))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := string(out.(json.RawMessage)); got != tt.want {
				t.Fatalf("output = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCommandArgvAndDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "work")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := script(t, dir, "args", `printf '["%s","%s","%s"]' "$1" "$2" "$(pwd)"`)
	out, err := commandSpec("t", &Command{Argv: []string{p, "one", "two words; rm -rf /"}, Dir: sub}).
		Run(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out.(json.RawMessage), &got); err != nil {
		t.Fatal(err)
	}
	realSub, _ := filepath.EvalSymlinks(sub)
	if got[0] != "one" || got[1] != "two words; rm -rf /" || (got[2] != sub && got[2] != realSub) {
		t.Fatalf("argv and dir = %q, want one, the second argument verbatim (no shell), and %s", got, sub)
	}
}

func TestCommandNonZeroExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := script(t, dir, "fail", `echo "partial output"; echo "warming up" >&2; echo "disk full" >&2; exit 3`)
	_, err := commandSpec("t", &Command{Argv: []string{p}}).Run(context.Background(), json.RawMessage(`{}`))
	te := wantToolError(t, err, tools.CodeToolFailed, "command exited with code 3")
	if !strings.Contains(te.Message, "disk full") {
		t.Fatalf("message %q lacks the stderr tail", te.Message)
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode != 3 || ee.Stderr != "warming up\ndisk full" {
		t.Fatalf("cause = %#v, want ExitError{3, stderr}", ee)
	}
}

func TestCommandStderrTailIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// 20000 bytes of noise, then the line that matters.
	p := script(t, dir, "noisy", `i=0; while [ $i -lt 200 ]; do printf '%0100d' 0 >&2; i=$((i+1)); done; echo "the real reason" >&2; exit 1`)
	_, err := commandSpec("t", &Command{Argv: []string{p}}).Run(context.Background(), json.RawMessage(`{}`))
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("error = %v, want an ExitError", err)
	}
	if !strings.HasSuffix(ee.Stderr, "the real reason") || !strings.HasPrefix(ee.Stderr, "…") || len(ee.Stderr) > stderrTailBytes+len("…") {
		t.Fatalf("stderr tail is %d bytes: %.40q…%q; want ≤ %d bytes ending with the last line", len(ee.Stderr), ee.Stderr, ee.Stderr[max(0, len(ee.Stderr)-20):], stderrTailBytes)
	}
}

func TestCommandStdoutLimit(t *testing.T) {
	t.Parallel()
	p := script(t, t.TempDir(), "big", `printf '"%0100d"' 0`)
	_, err := commandSpec("t", &Command{Argv: []string{p}, MaxOutputBytes: 10}).Run(context.Background(), json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeToolFailedPermanent, "more than 10 bytes")
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestCommandTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The script starts a background child (as a shell pipeline would), records its pid,
	// then waits; both must die at the timeout.
	p := script(t, dir, "hang", `sleep 300 & echo $! > `+pidFile+`; echo $$ >> `+pidFile+`; wait`)
	// On a loaded machine the shell may not get to its pids within the timeout: such a
	// run says nothing of the children, and is made again.
	var pids []string
	natstest.EventuallyNil(t, 30*time.Second, "a run whose script recorded its pids before its timeout", func() error {
		_ = os.Remove(pidFile)
		start := time.Now()
		_, err := commandSpec("t", &Command{Argv: []string{p}, Timeout: tools.Duration(300 * time.Millisecond)}).
			Run(context.Background(), json.RawMessage(`{}`))
		wantToolError(t, err, tools.CodeTimeout, "timed out after 300ms; its process group was killed")
		if elapsed := time.Since(start); elapsed > 60*time.Second {
			t.Fatalf("Run returned after %s: the timeout did not end the command", elapsed)
		}
		b, err := os.ReadFile(pidFile)
		if pids = strings.Fields(string(b)); err == nil && len(pids) != 2 {
			err = fmt.Errorf("pid file = %q", b)
		}
		return err
	})
	for _, s := range pids {
		pid, _ := strconv.Atoi(s)
		natstest.Eventually(t, 30*time.Second, "process "+s+" to end after the timeout", func() bool { return !alive(pid) })
	}
}

func TestCommandHonoursTheCallContext(t *testing.T) {
	t.Parallel()
	p := script(t, t.TempDir(), "hang", `exec sleep 300`)
	spec := commandSpec("t", &Command{Argv: []string{p}})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := spec.Run(ctx, json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeTimeout, "the call's deadline passed")

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	_, err = spec.Run(ctx, json.RawMessage(`{}`))
	if !errors.Is(err, tools.ErrCanceled) && !errors.Is(err, tools.ErrToolFailed) {
		t.Fatalf("Run with a canceled context: %v, want canceled", err)
	}
}

// TestCommandEnvironment cannot run in parallel: it sets the executor's environment.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("TF_ALLOWED", "visible")
	t.Setenv("TF_SECRET", "hidden")
	p := script(t, t.TempDir(), "env",
		`printf '{"allowed":"%s","secret":"%s","fixed":"%s","tool":"%s","call":"%s","attempt":"%s","home":"%s"}' `+
			`"${TF_ALLOWED-unset}" "${TF_SECRET-unset}" "${FIXED-unset}" "$TOOLFLEET_TOOL" "$TOOLFLEET_CALL_ID" "$TOOLFLEET_ATTEMPT" "${HOME-unset}"`)
	spec := commandSpec("env_tool", &Command{Argv: []string{p}, PassEnv: []string{"TF_ALLOWED", "TF_ABSENT"}, Env: map[string]string{"FIXED": "set"}})
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "call-1", RunID: "run-1", Attempt: 2})
	out, err := spec.Run(ctx, json.RawMessage(`{}`))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(out.(json.RawMessage), &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	want := map[string]string{"allowed": "visible", "secret": "unset", "fixed": "set", "tool": "env_tool", "call": "call-1", "attempt": "2", "home": "unset"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (whole environment view: %v)", k, got[k], v, got)
		}
	}
}

func TestCommandThatCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "not-a-program")
	if err := os.WriteFile(p, []byte("just text"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := commandSpec("t", &Command{Argv: []string{p}}).Run(context.Background(), json.RawMessage(`{}`))
	wantToolError(t, err, tools.CodeToolFailed, "cannot start")
}
