package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"golang.org/x/crypto/bcrypt"
)

// parts are the services of docker-compose.yml that run a toolfleet binary of the same
// name; nats is the only other one.
var parts = []string{"executor", "picker", "planner"}

// composePasswords are the development passwords docker-compose.yml defaults to: each
// part's TOOLFLEET_NATS_PASSWORD, and what the top of the file tells people to use.
var composePasswords = map[string]string{
	"executor": "dev-executor",
	"composer": "dev-composer",
	"planner":  "dev-planner",
	"picker":   "dev-picker",
	"client":   "dev-client",
	"admin":    "dev-admin",
	"sys":      "dev-sys",
}

// loadCompose loads docker-compose.yml with the compose-spec loader, as docker compose
// v2 does: interpolation, merge keys, defaults and paths resolved against the
// repository root. Variables come from environ and the env file, if one is named (as
// an .env file beside the compose file would be read), never from the test's
// environment.
func loadCompose(t *testing.T, environ map[string]string, envFile ...string) *types.Project {
	t.Helper()
	root := repoRoot(t)
	var env []string
	for k, v := range environ {
		env = append(env, k+"="+v)
	}
	fromFile := cli.WithDiscardEnvFile
	if len(envFile) > 0 {
		fromFile = cli.WithEnvFiles(envFile...)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(env), fromFile, cli.WithDotEnv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker compose would reject docker-compose.yml: %v", err)
	}
	return p
}

// image is what the Dockerfile's final stage gives every container by default.
type image struct {
	entrypoint, cmd, healthcheck []string
}

var dockerInstr = regexp.MustCompile(`(?m)^(FROM|ENTRYPOINT|CMD|HEALTHCHECK)\s+(.*)$`)

// dockerfileImage reads the final stage's ENTRYPOINT, CMD and HEALTHCHECK. They must be
// in exec (JSON) form: the shell form would run them under /bin/sh, which distroless
// does not have.
func dockerfileImage(t *testing.T) image {
	t.Helper()
	src := strings.ReplaceAll(string(readFile(t, filepath.Join(repoRoot(t), "Dockerfile"))), "\\\n", " ")
	var img image
	exec := func(instr, s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &v); err != nil {
			t.Errorf("Dockerfile %s %s: not the exec (JSON) form: %v", instr, s, err)
		}
		return v
	}
	for _, m := range dockerInstr.FindAllStringSubmatch(src, -1) {
		switch m[1] {
		case "FROM":
			img = image{} // a new stage: only the last one is the image
		case "ENTRYPOINT":
			img.entrypoint = exec(m[1], m[2])
		case "CMD":
			img.cmd = exec(m[1], m[2])
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(m[2], " CMD ")
			if !ok {
				t.Fatalf("Dockerfile HEALTHCHECK %s: no CMD", m[2])
			}
			img.healthcheck = exec(m[1], cmd)
		}
	}
	return img
}

// argv is the command line a service's container runs, as the compose specification and
// the Docker engine resolve it: entrypoint: replaces the image's ENTRYPOINT and drops its
// CMD; command: replaces the CMD; an unset one keeps the image's.
func argv(svc types.ServiceConfig, img image) []string {
	entry, cmd := img.entrypoint, img.cmd
	if svc.Entrypoint != nil {
		entry, cmd = svc.Entrypoint, nil
	}
	if svc.Command != nil {
		cmd = svc.Command
	}
	return append(slices.Clone(entry), cmd...)
}

// environment is a service's environment after interpolation.
func environment(svc types.ServiceConfig) map[string]string {
	e := map[string]string{}
	for k, v := range svc.Environment {
		if v != nil {
			e[k] = *v
		}
	}
	return e
}

// docker-compose.yml runs the same parts with the same users and the same auth.conf,
// each container runs the binary its service is named after, and the Dockerfile builds
// every binary the manifests run.
func TestCompose(t *testing.T) {
	root := repoRoot(t)
	p := loadCompose(t, nil)
	img := dockerfileImage(t)
	for _, s := range append([]string{"nats"}, parts...) {
		if _, err := p.GetService(s); err != nil {
			t.Fatalf("docker-compose.yml: %v", err)
		}
	}
	svc := func(n string) types.ServiceConfig { s, _ := p.GetService(n); return s }
	if ex := svc("executor"); ex.GetScale() != 2 {
		t.Errorf("executor replicas %d, want 2", ex.GetScale())
	}

	// The image: the all-in-one by default, listening on every interface of the
	// container; one health check for whichever binary runs.
	if got, want := append(slices.Clone(img.entrypoint), img.cmd...), []string{"/usr/local/bin/toolfleet", "dev", "-host", "0.0.0.0"}; !slices.Equal(got, want) {
		t.Errorf("the image runs %q by default, want %q", got, want)
	}
	if want := []string{"/usr/local/bin/toolfleet", "health"}; !slices.Equal(img.healthcheck, want) {
		t.Errorf("the image's HEALTHCHECK runs %q, want %q", img.healthcheck, want)
	}

	// Ports: on loopback unless TOOLFLEET_BIND says otherwise.
	for bind, p := range map[string]*types.Project{"127.0.0.1": p, "0.0.0.0": loadCompose(t, map[string]string{"TOOLFLEET_BIND": "0.0.0.0"})} {
		for _, s := range p.Services {
			for _, port := range s.Ports {
				if port.HostIP != bind {
					t.Errorf("%s publishes %s:%s on %q, want %q", s.Name, port.Published, port.Protocol, port.HostIP, bind)
				}
			}
		}
	}
	if ports := svc("planner").Ports; len(ports) != 1 || ports[0].Target != 8080 || ports[0].Published != "8080" {
		t.Errorf("planner ports %+v, want the API on 8080", ports)
	}

	// NATS: the shared auth.conf and a single-node config with JetStream, loaded as the
	// nats container's command line loads it, with the container's environment.
	nats := svc("nats")
	mounts := map[string]string{}
	for _, v := range nats.Volumes {
		mounts[v.Target] = v.Source
	}
	if want := filepath.Join(root, "deploy", "k8s", "base", "nats", "auth.conf"); mounts["/etc/nats/auth.conf"] != want {
		t.Errorf("compose mounts %q as auth.conf, want the one copy in deploy/k8s/base/nats", mounts["/etc/nats/auth.conf"])
	}
	opts := loadConfig(t, string(readFile(t, mounts["/etc/nats/nats.conf"])), string(readFile(t, mounts["/etc/nats/auth.conf"])),
		argv(nats, image{}), environment(nats))
	checkParsedNATS(t, opts, natsWants["compose"], composePasswords)
	if len(opts.Routes) != 0 {
		t.Errorf("compose NATS has %d routes, want one node", len(opts.Routes))
	}
	checkComposePasswordChange(t, mounts)

	// Each part: its own binary, a user of auth.conf with the password whose hash the
	// server holds (checked above), and only environment variables its binary reads.
	for _, part := range parts {
		s := svc(part)
		if got, want := argv(s, img), []string{"/usr/local/bin/" + part}; !slices.Equal(got, want) {
			t.Errorf("%s runs %q, want %q", part, got, want)
		}
		if s.Image != "toolfleet:dev" || s.Build == nil || s.Build.Context != root {
			t.Errorf("%s: image %q built from %+v, want toolfleet:dev built from the repository", part, s.Image, s.Build)
		}
		environ := environment(s)
		user := environ["TOOLFLEET_NATS_USER"]
		if pw, ok := composePasswords[user]; !ok || environ["TOOLFLEET_NATS_PASSWORD"] != pw {
			t.Errorf("%s logs in as %q with %q, not a user of auth.conf with its development password", part, user, environ["TOOLFLEET_NATS_PASSWORD"])
		}
		if u := environ["TOOLFLEET_NATS_URL"]; u != "nats://nats:4222" {
			t.Errorf("%s: TOOLFLEET_NATS_URL %v", part, u)
		}
		t.Run("code/"+part, func(t *testing.T) {
			code := codeOf(t, part)
			for n := range environ {
				if !code.readsEnv(n) {
					t.Errorf("compose %s sets %s, which cmd/%s never reads", part, n, part)
				}
			}
		})
	}

	checkDockerfile(t, string(readFile(t, filepath.Join(root, "Dockerfile"))), programs(t, root))
}

// programs are the names of the repository's programs: the folders of cmd/.
func programs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

var fromLine = regexp.MustCompile(`(?m)^FROM\s+(\S+)`)

// checkDockerfile requires every program (bins) to be built static into a distroless
// nonroot image and shipped in /usr/local/bin/, from base images pinned to an exact
// version or a digest.
func checkDockerfile(t *testing.T, dockerfile string, bins []string) {
	copied := regexp.MustCompile(`(?m)^COPY --from=build ([^\n]*) /usr/local/bin/$`).FindStringSubmatch(dockerfile)
	for _, bin := range bins {
		if !regexp.MustCompile(`\./cmd/` + regexp.QuoteMeta(bin) + `(\s|$)`).MatchString(dockerfile) {
			t.Errorf("the Dockerfile does not build cmd/%s", bin)
		}
		if copied == nil || !slices.Contains(strings.Fields(copied[1]), "/out/"+bin) {
			t.Errorf("the Dockerfile does not copy %s into /usr/local/bin/", bin)
		}
	}
	if !strings.Contains(dockerfile, "CGO_ENABLED=0") || !strings.Contains(dockerfile, "distroless/static") || !strings.Contains(dockerfile, ":nonroot") {
		t.Error("the Dockerfile must build static binaries into a distroless nonroot image")
	}
	// distroless publishes no version tags, only digests; the Dockerfile says how to pin
	// one (a digest cannot be checked without the registry, so none is made up here).
	pinned := regexp.MustCompile(`(@sha256:[0-9a-f]{64}|:\d+\.\d+\.\d+[^@]*)$|^gcr\.io/distroless/static-debian\d+:nonroot$`)
	for _, m := range fromLine.FindAllStringSubmatch(dockerfile, -1) {
		if !pinned.MatchString(m[1]) {
			t.Errorf("FROM %s: pin an exact version (x.y.z) or a digest", m[1])
		}
	}
}

// checkComposePasswordChange changes every password as the top of docker-compose.yml
// says, in an .env file: each plaintext, and its bcrypt hash in single quotes (unquoted,
// compose would read the hash's $... as variables). The server must then hold exactly
// those hashes and each part log in with its new plaintext.
func checkComposePasswordChange(t *testing.T, mounts map[string]string) {
	t.Helper()
	custom := map[string]string{}
	var dotenv strings.Builder
	for user := range composePasswords {
		custom[user] = "changed-" + user
		h, err := bcrypt.GenerateFromPassword([]byte(custom[user]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&dotenv, "TOOLFLEET_%s_PASSWORD=%s\n%s='%s'\n", strings.ToUpper(user), custom[user], hashVar(user), h)
	}
	envFile := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(envFile, []byte(dotenv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, nil, envFile)
	nats, _ := p.GetService("nats")
	opts := loadConfig(t, string(readFile(t, mounts["/etc/nats/nats.conf"])), string(readFile(t, mounts["/etc/nats/auth.conf"])),
		argv(nats, image{}), environment(nats))
	checkParsedNATS(t, opts, natsWants["compose"], custom)
	for _, part := range parts {
		s, _ := p.GetService(part)
		if e := environment(s); e["TOOLFLEET_NATS_PASSWORD"] != custom[e["TOOLFLEET_NATS_USER"]] {
			t.Errorf("%s: with the .env file, password %q, want %q", part, e["TOOLFLEET_NATS_PASSWORD"], custom[e["TOOLFLEET_NATS_USER"]])
		}
	}
}
