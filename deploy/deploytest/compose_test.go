package deploytest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// composeVar is a docker-compose interpolation, ${NAME} or ${NAME:-default}.
var composeVar = regexp.MustCompile(`^\$\{([A-Z0-9_]+)(:-[^}]*)?\}$`)

// docker-compose.yml runs the same parts with the same users and the same auth.conf, and
// the Dockerfile builds every binary the manifests run.
func TestCompose(t *testing.T) {
	root := repoRoot(t)
	docs := decodeAll(t, "docker-compose.yml", readFile(t, filepath.Join(root, "docker-compose.yml")))
	if len(docs) != 1 {
		t.Fatalf("docker-compose.yml: %d documents", len(docs))
	}
	services, _ := get(docs[0], "services").(obj)
	for _, s := range []string{"nats", "executor", "picker", "planner"} {
		if services[s] == nil {
			t.Fatalf("docker-compose.yml has no service %s", s)
		}
	}
	if r := get(services["executor"], "deploy", "replicas"); r != 2 {
		t.Errorf("executor replicas %v, want 2", r)
	}
	if p := fmt.Sprint(list(services["planner"], "ports")); !strings.Contains(p, "8080:8080") {
		t.Errorf("planner ports %s, want 8080", p)
	}

	// NATS: the shared auth.conf and a single-node config with JetStream.
	mounts := map[string]string{}
	for _, v := range list(services["nats"], "volumes") {
		src, dst, _ := strings.Cut(v.(string), ":")
		mounts[strings.TrimSuffix(dst, ":ro")] = src
	}
	if mounts["/etc/nats/auth.conf"] != "./deploy/k8s/base/nats/auth.conf" {
		t.Errorf("compose mounts %q as auth.conf, want the one copy in deploy/k8s/base/nats", mounts["/etc/nats/auth.conf"])
	}
	conf := string(readFile(t, filepath.Join(root, mounts["/etc/nats/nats.conf"])))
	opts := loadConfig(t, conf, string(readFile(t, authConf(t))), nil)
	if !opts.JetStream || opts.HTTPPort != 8222 || !opts.SyncAlways || len(opts.Routes) != 0 {
		t.Errorf("compose NATS: jetstream=%v monitor=%d sync always=%v routes=%d; want JetStream, :8222, always (one node), no routes",
			opts.JetStream, opts.HTTPPort, opts.SyncAlways, len(opts.Routes))
	}
	natsEnv, _ := get(services["nats"], "environment").(obj)

	// Each part: a user of auth.conf, the password variable the server checks for it,
	// and only environment variables its binary reads.
	for _, part := range []string{"executor", "picker", "planner"} {
		svc := services[part]
		environ, _ := get(svc, "environment").(obj)
		user, _ := environ["TOOLFLEET_NATS_USER"].(string)
		if _, ok := passwords[user]; !ok {
			t.Errorf("%s logs in as %q, not a user of auth.conf", part, user)
		}
		want := composeVar.FindStringSubmatch(fmt.Sprint(natsEnv["TOOLFLEET_"+strings.ToUpper(user)+"_PASSWORD"]))
		got := composeVar.FindStringSubmatch(fmt.Sprint(environ["TOOLFLEET_NATS_PASSWORD"]))
		if want == nil || got == nil || want[0] != got[0] {
			t.Errorf("%s: password %v, but NATS checks %q against %v", part, environ["TOOLFLEET_NATS_PASSWORD"], user, natsEnv["TOOLFLEET_"+strings.ToUpper(user)+"_PASSWORD"])
		}
		if u := environ["TOOLFLEET_NATS_URL"]; u != "nats://nats:4222" {
			t.Errorf("%s: TOOLFLEET_NATS_URL %v", part, u)
		}
		bin := strings.TrimPrefix(fmt.Sprint(list(svc, "command")[0]), "/usr/local/bin/")
		if bin != part {
			t.Errorf("%s runs %s", part, bin)
		}
		t.Run("code/"+bin, func(t *testing.T) {
			code := codeOf(t, bin)
			for n := range environ {
				if !code.readsEnv(n) {
					t.Errorf("compose %s sets %s, which cmd/%s never reads", part, n, bin)
				}
			}
		})
	}

	dockerfile := string(readFile(t, filepath.Join(root, "Dockerfile")))
	for _, bin := range []string{"executor", "picker", "planner", "toolfleet"} {
		if !strings.Contains(dockerfile, "./cmd/"+bin) {
			t.Errorf("the Dockerfile does not build cmd/%s", bin)
		}
	}
	if !strings.Contains(dockerfile, "CGO_ENABLED=0") || !strings.Contains(dockerfile, "distroless/static") || !strings.Contains(dockerfile, ":nonroot") {
		t.Error("the Dockerfile must build static binaries into a distroless nonroot image")
	}
}
