package deploytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
)

// repoRoot is the repository root, found from this file's place in it.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// authConf is the one permissions file of the deployment.
func authConf(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "k8s", "base", "nats", "auth.conf")
}

// passwords of the users in auth.conf: the plaintext each logs in with. The server gets
// bcrypt hashes of them through its environment, as the Secret toolfleet-nats-server
// gives them in Kubernetes (serverEnv).
var passwords = map[string]string{
	"executor": "executor-secret",
	"composer": "composer-secret",
	"planner":  "planner-secret",
	"picker":   "picker-secret",
	"client":   "client-secret",
	"admin":    "admin-secret",
	"sys":      "sys-secret",
}

// routePassword is the cluster route user's password (NATS_ROUTE_PASSWORD).
const routePassword = "route-secret"

var (
	hashesOnce sync.Once
	hashes     map[string]string // user -> bcrypt hash of passwords[user]
)

// serverEnv is the environment a NATS pod gets from the Secret toolfleet-nats-server:
// TOOLFLEET_<USER>_PASSWORD_BCRYPT for every user of auth.conf, hashed here at run time
// (at bcrypt's minimum cost, to keep the tests fast), and NATS_ROUTE_PASSWORD.
func serverEnv(t testing.TB) map[string]string {
	t.Helper()
	hashesOnce.Do(func() {
		hashes = map[string]string{}
		for user, pw := range passwords {
			h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
			if err != nil {
				panic(err)
			}
			hashes[user] = string(h)
		}
	})
	env := map[string]string{"NATS_ROUTE_PASSWORD": routePassword}
	for user, h := range hashes {
		env[hashVar(user)] = h
	}
	return env
}

// hashVar is the environment variable auth.conf reads user's password hash from.
func hashVar(user string) string { return "TOOLFLEET_" + strings.ToUpper(user) + "_PASSWORD_BCRYPT" }

// setEnv sets every variable of env for the rest of the test.
func setEnv(t *testing.T, env map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// authServer is a nats-server with JetStream whose users and permissions come from
// deploy/k8s/base/nats/auth.conf.
type authServer struct {
	srv *server.Server
}

// startAuthServer writes a server config that includes the real auth.conf (copied beside
// it, because nats-server resolves includes relative to the including file), loads it
// with server.ProcessConfigFile as nats-server -c would, and starts it on a free port.
func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	setEnv(t, serverEnv(t))
	return startAuthServerEnv(t)
}

// startAuthServerEnv is startAuthServer in the environment the test has already set.
func startAuthServerEnv(t *testing.T) *authServer {
	t.Helper()
	auth, err := os.ReadFile(authConf(t))
	if err != nil {
		t.Fatalf("read auth.conf: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "auth.conf"), auth, 0o600); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "jetstream")
	conf := "listen: 127.0.0.1:-1\n" +
		"jetstream { store_dir: " + quote(store) + " }\n" +
		"include ./auth.conf\n"
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("load nats config with auth.conf: %v", err)
	}
	return &authServer{srv: startServer(t, opts)}
}

// startServer starts a nats-server with opts, quiet, and stops it when the test ends.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new nats-server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready after 10s")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `\`, `\\`) + `"` }

// client is one part's connection: its user, JetStream, and every permissions violation
// the server reported to it (denied publishes are reported asynchronously, so a failed
// call is only proven to be a denial when the violation for its subject shows up here).
type client struct {
	t    *testing.T
	user string
	nc   *nats.Conn
	js   jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

// connect logs in as user with the password the server was given.
func (s *authServer) connect(t *testing.T, user string) *client {
	t.Helper()
	c := &client{t: t, user: user}
	nc, err := nats.Connect(s.srv.ClientURL(), nats.UserInfo(user, passwords[user]), nats.Name(user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				c.mu.Lock()
				c.violations = append(c.violations, err.Error())
				c.mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noViolations fails the test when the server refused anything this user did: the
// allowed paths must be allowed completely, acks and flow control included. A refusal
// on a subject starting with one of except is expected (see refusedCleanup).
func (c *client) noViolations(except ...string) {
	c.t.Helper()
	// A violation is reported after the refused publish; a round trip flushes it in.
	_ = c.nc.FlushTimeout(2 * time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	var unexpected []string
	for _, v := range c.violations {
		if !mentionsPrefix(v, except) {
			unexpected = append(unexpected, v)
		}
	}
	c.violations = nil
	if len(unexpected) > 0 {
		c.t.Errorf("%s was refused something it needs: %v", c.user, unexpected)
	}
}

func mentionsPrefix(violation string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.Contains(violation, `"`+p) {
			return true
		}
	}
	return false
}

// refusedCleanup is the one refusal the deployment makes on purpose: an ordered consumer
// (the planner's and a client's view of one run) deletes its previous ephemeral consumer
// in the background when it moves on, and that delete is refused, because a user allowed
// to delete consumers on TOOLFLEET_EVENTS or TOOLFLEET_RESULTS could delete the durable
// consumers other parts depend on. The server removes the ephemeral consumer itself once
// it is inactive, and nats.go ignores the failed delete.
func refusedCleanup(stream string) string { return "$JS.API.CONSUMER.DELETE." + stream + "." }

// denied runs op, which must fail, and requires the server to have reported a
// permissions violation naming subject: the failure is the server's refusal, not a
// timeout or a missing stream.
func (c *client) denied(what, subject string, op func(ctx context.Context) error) {
	c.t.Helper()
	c.deniedOn(what, []string{subject}, op)
}

// deniedOn is denied with a violation naming any of subjects (the server reports a
// publish to a mapped subject under the subject it was mapped to).
func (c *client) deniedOn(what string, subjects []string, op func(ctx context.Context) error) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if err := op(ctx); err == nil {
		c.t.Errorf("%s could %s", c.user, what)
		return
	}
	natstest.EventuallyNil(c.t, 30*time.Second, c.user+": a permissions violation on "+strings.Join(subjects, " or ")+" after "+what, func() error {
		// The server reports the violation after the refusal; a round trip flushes it in.
		_ = c.nc.FlushTimeout(time.Second)
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, v := range c.violations {
			if slices.ContainsFunc(subjects, func(subject string) bool { return strings.Contains(v, `"`+subject+`"`) }) {
				c.violations = append(c.violations[:i], c.violations[i+1:]...)
				return nil
			}
		}
		return fmt.Errorf("%s failed, but not with one (violations: %v)", what, c.violations)
	})
}
