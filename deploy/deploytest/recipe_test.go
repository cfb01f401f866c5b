package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// hashPipe turns htpasswd's output into the hash nats-server takes: no colon or newline,
// and the prefix $2a$ instead of $2y$ (the config parser reads "$2y$..." from a variable
// as a reference to another variable, and the server refuses to start).
const hashPipe = `| tr -d ':\n' | sed 's/^\$2y\$/$2a$/'`

// The password recipe of deploy/k8s/README.md, run as it is written: its hash, given to
// the server as the Secret gives it, lets the user log in. The same recipe is quoted in
// auth.conf and docker-compose.yml.
func TestPasswordRecipe(t *testing.T) {
	root := repoRoot(t)
	var recipe string
	for _, f := range []string{"deploy/k8s/README.md", "deploy/k8s/base/nats/auth.conf", "docker-compose.yml"} {
		for _, line := range strings.Split(string(readFile(t, filepath.Join(root, f))), "\n") {
			if !strings.Contains(line, "htpasswd -bnBC") {
				continue
			}
			if !strings.Contains(line, hashPipe) {
				t.Errorf("%s: the htpasswd recipe lacks %s: %s", f, hashPipe, line)
			}
			if f == "deploy/k8s/README.md" {
				recipe = strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
			}
		}
	}
	if recipe == "" {
		t.Fatal("deploy/k8s/README.md has no htpasswd recipe")
	}
	if _, err := exec.LookPath("htpasswd"); err != nil {
		t.Skip("htpasswd (apache2-utils) not on PATH: the recipe is not run")
	}
	// The README's loop body for u=client, in a directory holding the password file.
	dir := t.TempDir()
	const pw = "0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(filepath.Join(dir, "client"), []byte(pw), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "u=client; "+recipe)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", recipe, err, out)
	}
	hash := string(readFile(t, filepath.Join(dir, "client-bcrypt")))
	if !strings.HasPrefix(hash, "$2a$11$") {
		t.Fatalf("the recipe made %q, want a $2a$ hash of cost 11", hash)
	}

	hashes := serverEnv(t)
	hashes[hashVar("client")] = hash
	setEnv(t, hashes)
	srv := startAuthServerEnv(t)
	nc, err := nats.Connect(srv.srv.ClientURL(), nats.UserInfo("client", pw))
	if err != nil {
		t.Fatalf("client with the recipe's hash: %v", err)
	}
	nc.Close()
}
