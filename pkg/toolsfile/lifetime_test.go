package toolsfile

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nuid"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// markedProcesses returns the pids of the processes whose environment holds
// TOOLFLEET_TEST_MARKER=marker: a tool and everything it started.
func markedProcesses(marker string) []int {
	want := []byte("\x00TOOLFLEET_TEST_MARKER=" + marker + "\x00")
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, env...), want) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// An executor SIGKILLed while its non-idempotent command tools run, one plain and one
// sandboxed, each a shell waiting in a loop (children of its own) before it reads its
// input: nothing of them is left running, none ever acts on a cut input, and no run
// context is left in the temporary directory. The input is larger than a pipe holds,
// so an executor that wrote it to a pipe would die in the middle of writing.
func TestExecutorKilledMidCallLeavesNoToolBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills an executor process")
	}
	fx := natstest.StartJetStream(t, events.Config{})
	dir, tmp := t.TempDir(), t.TempDir()
	marker := nuid.Next()
	script(t, dir, "victim.sh", `echo $$ > "$DIR/started.$TOOLFLEET_TOOL"
while [ ! -e "$DIR/go" ]; do sleep 0.05; done
cat > "$DIR/input.$TOOLFLEET_TOOL"
echo acted >> "$DIR/acted"
sleep 600`)
	tool := func(name, sandbox string) string {
		return `
  - name: ` + name + `
    safe: true
    idempotent: false
    runContext: true
    parameters: {type: object}
    command:
      argv: [./victim.sh]
      passEnv: [PATH]
      env: {DIR: ` + dir + `, TOOLFLEET_TEST_MARKER: ` + marker + `}` + sandbox
	}
	file := writeFile(t, dir, "tools.yaml", "tools:"+tool("plain", "")+tool("confined", `
      sandbox: {write: [`+dir+`]}`)+"\n")
	names := []string{"plain"}
	if abiAtLeast(4) {
		names = append(names, "confined")
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childURLEnv+"="+fx.Srv.URL(), childFileEnv+"="+file, "TMPDIR="+tmp)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = child.Wait(); close(exited) }() // killed: its end says nothing
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
		for _, pid := range markedProcesses(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	args, err := json.Marshal(map[string]string{"text": strings.Repeat("x", 200<<10)})
	if err != nil {
		t.Fatal(err)
	}
	rc := &tools.RunContext{RunID: "run-1", Messages: json.RawMessage(`[{"role":"user","text":"private"}]`)}
	for _, name := range names {
		msg, err := events.NewCall(events.CallOptions{Source: "/test", ID: "call-" + name, RunID: "run-1"},
			events.Call{Tool: name, Arguments: args, Context: rc})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = fx.JS.PublishMsg(ctx, msg)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		natstest.Eventually(t, 30*time.Second, "tool "+name+" to start", func() bool {
			_, err := os.Stat(filepath.Join(dir, "started."+name))
			return err == nil
		})
	}

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	// Now the tools may go on, if they are still there.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Gone, or (were they still there) done acting on what they read.
	acted := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "acted"))
		return strings.Count(string(b), "acted")
	}
	natstest.Eventually(t, 10*time.Second, "the tools to be gone (or to act)", func() bool {
		return len(markedProcesses(marker)) == 0 || acted() == len(names)
	})
	if pids := markedProcesses(marker); len(pids) > 0 {
		t.Errorf("processes of the tools outlived their executor: %v", pids)
	}
	for _, name := range names {
		if in, err := os.ReadFile(filepath.Join(dir, "input."+name)); err == nil && !bytes.Equal(in, args) {
			t.Errorf("tool %s acted on a cut input: %d bytes of %d", name, len(in), len(args))
		}
	}
	if n := acted(); n > 0 {
		t.Errorf("%d tools acted after their executor was killed", n)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
		t.Errorf("the killed executor left files in its temporary directory: %v", left)
	}
}
