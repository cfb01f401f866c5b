package toolfleetcli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/ops"
)

// `toolfleet version` says which release a binary is: built with go build from a git
// checkout of a tagged commit, the tag, the commit and whether the tree was modified;
// built without a checkout to stamp from (the Dockerfile's build), the version the
// linker was given.
func TestVersionFromTag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/toolfleet in a tagged copy of the repository")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The tree as it is here, committed and tagged in a repository of its own.
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted here, not yet in git
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitEnv := []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	run(gitEnv, "git", "init", "-q")
	run(gitEnv, "git", "add", "-A")
	run(gitEnv, "git", "commit", "-q", "-m", "release")
	run(gitEnv, "git", "tag", "v0.1.0")
	head := run(gitEnv, "git", "rev-parse", "HEAD")

	bin := filepath.Join(t.TempDir(), "toolfleet")
	version := func(build ...string) (ops.BuildInfo, string) {
		t.Helper()
		// VCS stamping on, whatever this machine's GOFLAGS say (go build's default).
		run([]string{"GOFLAGS=-buildvcs=auto"}, "go", append(append([]string{"build", "-o", bin}, build...), "./cmd/toolfleet")...)
		var b ops.BuildInfo
		if err := json.Unmarshal([]byte(run(nil, bin, "version", "-o", "json")), &b); err != nil {
			t.Fatal(err)
		}
		return b, run(nil, bin, "version")
	}

	b, line := version()
	if b.Version != "v0.1.0" || b.Revision != head || b.Modified || !strings.HasPrefix(line, "toolfleet v0.1.0 (revision "+head[:12]+", 20") {
		t.Errorf("built at the tag: %+v\n%s", b, line)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, line = version()
	if b.Version != "v0.1.0+dirty" || b.Revision != head || !b.Modified || !strings.Contains(line, head[:12]+", modified") {
		t.Errorf("built at the tag with a change: %+v\n%s", b, line)
	}
	// The Dockerfile's build: no .git in its context, the version from the linker.
	b, line = version("-buildvcs=false", "-ldflags", "-X github.com/toolfleet/toolfleet/internal/ops.version=v0.1.0")
	if b.Version != "v0.1.0" || b.Revision != "" || !strings.HasPrefix(line, "toolfleet v0.1.0 (no VCS revision") {
		t.Errorf("built with the version given to the linker: %+v\n%s", b, line)
	}
}
