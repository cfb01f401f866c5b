package toolsfile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/sandbox"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// nobody is the unprivileged user of the root-only tests.
var nobody = &sandbox.User{UID: 65534, GID: 65534}

// openDir is a temporary directory anyone may enter and list (a tool run as nobody
// works in it).
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// spyScript looks for phrase in every regular file it can reach in the temporary
// directory (and toolfleet's files in /tmp), and among the open files and the environment of the tool $HOLDER and of
// the executor $EXECUTOR, and prints how many held it: "tmp N proc N".
const spyScript = `found() { n=0; for f in "$@"; do if [ -f "$f" ] && head -c 4000000 "$f" 2>/dev/null | grep -q "$PHRASE"; then n=$((n+1)); fi; done; echo $n; }
echo "tmp $(found "$TMPDIR"/* /tmp/toolfleet*) proc $(found /proc/$HOLDER/fd/* /proc/$HOLDER/environ /proc/$EXECUTOR/fd/*)"`

// Another tool cannot read the run context of a call running at the same time: no
// file of it is in a temporary directory (a glob finds nothing, sandboxed or not), and
// neither a sandboxed tool nor one run as another user can reach the holder's or the
// executor's open files through /proc. An unsandboxed tool of the executor's own user
// can (ptrace rules: same user); the test logs it, docs/tools.md says it.
func TestOtherToolsCannotReadARunContext(t *testing.T) {
	dir := openDir(t)
	tmp := openDir(t)
	t.Setenv("TMPDIR", tmp)
	phrase := "secret-plans-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready")

	// The holder reads its context, says so with its pid, and waits on the fifo.
	holder := &Command{Argv: []string{"/bin/sh", "-c", `cat "$TOOLFLEET_RUN_CONTEXT" > /dev/null && echo $$ > ` + ready +
		`.tmp && mv ` + ready + `.tmp ` + ready + `; read x < ` + fifo + `; cat "$TOOLFLEET_RUN_CONTEXT"`}, Dir: dir}
	rc := &tools.RunContext{RunID: "r-1", Messages: json.RawMessage(`[{"role":"user","text":"` + phrase + `"}]`)}
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{CallID: "c-1", RunID: "r-1", Attempt: 1, Run: rc})
	type outcome struct {
		out any
		err error
	}
	held := make(chan outcome, 1)
	go func() {
		out, err := holder.run(ctx, "holder", nil, json.RawMessage(`{}`))
		held <- outcome{out, err}
	}()
	released := false
	release := func() {
		if !released {
			released = true
			if err := os.WriteFile(fifo, []byte("go\n"), 0); err != nil {
				t.Error(err)
			}
		}
	}
	waited := false
	defer func() {
		release()
		if !waited {
			<-held
		}
	}()
	natstest.Eventually(t, 10*time.Second, "the holder to read its run context", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	pid, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}

	spy := func(pol *sandbox.Policy, as *sandbox.User) (tmpHits, procHits string) {
		t.Helper()
		c := &Command{Argv: []string{"/bin/sh", "-c", spyScript}, Dir: dir, PassEnv: []string{"PATH"}, RunAs: as,
			Env: map[string]string{"TMPDIR": tmp, "PHRASE": phrase, "HOLDER": strings.TrimSpace(string(pid)), "EXECUTOR": strconv.Itoa(os.Getpid())}}
		if pol != nil {
			p := *pol
			p.RunAs = as
			c.policy = &p
		}
		out, err := c.run(context.Background(), "spy", nil, json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("spy (sandboxed %v, as %v): %v", pol != nil, as, err)
		}
		var line string
		if err := json.Unmarshal(out.(json.RawMessage), &line); err != nil {
			t.Fatalf("spy output %s: %v", out, err)
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("spy printed %q", line)
		}
		return f[1], f[3]
	}

	tmpHits, procHits := spy(nil, nil)
	if tmpHits != "0" {
		t.Errorf("an unsandboxed tool found the run context in %s files of the temporary directories", tmpHits)
	}
	t.Logf("an unsandboxed tool of the executor's own user found it in %s of the holder's and the executor's open files (same user: not isolated)", procHits)

	sandboxed := abiAtLeast(4)
	if sandboxed {
		if tmpHits, procHits = spy(&sandbox.Policy{Read: []string{tmp, "/tmp"}}, nil); tmpHits != "0" || procHits != "0" {
			t.Errorf("a read-only sandboxed tool (granted the temporary directories) found the run context: tmp %s, proc %s", tmpHits, procHits)
		}
	}
	if os.Geteuid() == 0 {
		if tmpHits, procHits = spy(nil, nobody); tmpHits != "0" || procHits != "0" {
			t.Errorf("an unsandboxed tool run as nobody found the run context: tmp %s, proc %s", tmpHits, procHits)
		}
		if sandboxed {
			if tmpHits, procHits = spy(&sandbox.Policy{Read: []string{tmp, "/tmp"}}, nobody); tmpHits != "0" || procHits != "0" {
				t.Errorf("a sandboxed tool run as nobody found the run context: tmp %s, proc %s", tmpHits, procHits)
			}
		}
	} else {
		t.Log("not root: the runAs spies are left out")
	}

	release()
	o := <-held
	waited = true
	if o.err != nil {
		t.Fatalf("holder: %v", o.err)
	}
	if got, _ := json.Marshal(o.out); !strings.Contains(string(got), phrase) {
		t.Errorf("the holder itself printed %s, without its run context", got)
	}
}

// abiAtLeast reports whether the kernel's Landlock ABI is at least v.
func abiAtLeast(v int) bool {
	abi, _ := sandbox.ABI()
	return abi >= v
}
