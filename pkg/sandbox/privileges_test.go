package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// nobody is the unprivileged user of the root-only tests.
const nobody = 65534

// needRoot skips where the tests do not run as root: what they check is what a root
// executor's sandboxed programs may not do.
func needRoot(t *testing.T) {
	t.Helper()
	needLandlock(t)
	if os.Geteuid() != 0 {
		t.Skipf("runs as uid %d: these tests check a root launcher", os.Geteuid())
	}
}

// openDir is a temporary directory anyone may enter and list.
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

// A root executor's sandboxed program holds no capability: it cannot chmod or chown a
// file another user owns (even where it may write), change a root-owned file's
// metadata under read-only, read another process's environment, or open netlink, raw
// or packet sockets with the network granted. Its status shows every set empty,
// no_new_privs and a seccomp filter.
func TestRootSandboxHoldsNoCapabilities(t *testing.T) {
	needRoot(t)
	dir := openDir(t)
	theirs, mine := filepath.Join(dir, "theirs"), filepath.Join(dir, "mine")
	for _, f := range []string{theirs, mine} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secret := exec.CommandContext(ctx, "sleep", "600")
	secret.Env = []string{"TOOLFLEET_TEST_SECRET=hunter2"}
	if err := secret.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = secret.Wait() }()
	environ := "read:/proc/" + strconv.Itoa(secret.Process.Pid) + "/environ"

	got := runProbe(t, sandbox.Policy{Write: []string{dir}, Network: true}, dir,
		"chmod:"+theirs, "chown:"+theirs, environ, "socket:16:3:0", "socket:2:3:1", "socket:17:3:0", "status")
	for _, a := range []string{"chmod:" + theirs, "chown:" + theirs} {
		if !strings.Contains(got[a], "operation not permitted") {
			t.Errorf("%s by a root executor's sandboxed program: %q, want operation not permitted", a, got[a])
		}
	}
	if got[environ] == "ok" {
		t.Errorf("a root executor's sandboxed program read another process's environment")
	}
	for _, a := range []string{"socket:16:3:0", "socket:2:3:1", "socket:17:3:0"} {
		if !strings.Contains(got[a], "permission denied") {
			t.Errorf("%s with the network granted: %q, want permission denied", a, got[a])
		}
	}
	for _, want := range []string{"CapInh: 0000000000000000", "CapPrm: 0000000000000000", "CapEff: 0000000000000000",
		"CapBnd: 0000000000000000", "CapAmb: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"} {
		if !strings.Contains(got["status"], want) {
			t.Errorf("the program's status %q lacks %q", got["status"], want)
		}
	}
	if st, err := os.Stat(theirs); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("%s after the program: %v, %v; want mode 0644", theirs, st.Mode(), err)
	}

	// Under read-only even the files root owns keep their metadata.
	got = runProbe(t, sandbox.ReadOnly(), dir, "chmod:"+mine, "chown:"+mine, "touch:"+mine)
	for _, a := range []string{"chmod:" + mine, "chown:" + mine, "touch:" + mine} {
		if !strings.Contains(got[a], "operation not permitted") {
			t.Errorf("%s under read-only: %q, want operation not permitted", a, got[a])
		}
	}
	if st, err := os.Stat(mine); err != nil || st.Mode().Perm() != 0o644 || st.ModTime().Unix() == 1 {
		t.Errorf("%s after the read-only program: %v, %v, %v", mine, st.Mode(), st.ModTime(), err)
	}
}

// RunAs: the launcher switches to the user and group before it execs the program,
// which has no supplementary group and no capability.
func TestRunAs(t *testing.T) {
	needRoot(t)
	dir := openDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := sandbox.Command(ctx, sandbox.Policy{RunAs: &sandbox.User{UID: nobody, GID: nobody}}, "/bin/sh", "-c",
		`grep -E '^(Uid|Gid|Groups|CapEff|CapPrm):' /proc/self/status; echo x > /dev/null && echo done`)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	fields := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{"Uid: 65534 65534 65534 65534", "Gid: 65534 65534 65534 65534", "Groups: CapPrm: 0000000000000000",
		"CapEff: 0000000000000000", "done"} {
		if !strings.Contains(fields, want) {
			t.Errorf("the program says %q, want %q in it", fields, want)
		}
	}
}
