package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// TestComposeRun runs docker-compose.yml without Docker. NATS is an embedded
// nats-server loaded from the nats service's command line, mounted files and
// environment; every replica of every part runs the command line its service resolves
// to (entrypoint, command and the Dockerfile's defaults, as the compose specification
// says) built from this tree, with its compose environment. Each must become ready on
// /readyz of its ops port, the image's HEALTHCHECK (toolfleet health, run in the part's
// environment as docker does) must pass for it, and a call published as docs/deployment.md shows
// must get its result, read as docs/deployment.md shows. The image's default command (the
// all-in-one) must become ready and listen beyond loopback too.
//
// The compose file's example run is asked of the planner's API too, with TOOLFLEET_MODEL
// set (as a user sets it) to an offline script instead of a model reached by network.
//
// What is rewritten, because every container here shares one host and one filesystem
// (nothing else is changed):
//   - the NATS URL's host: nats:4222 becomes the embedded server's 127.0.0.1:<port>;
//   - ports: each process gets its own TOOLFLEET_OPS_ADDR (in compose each container has
//     its own :9090) and the planner its own TOOLFLEET_HTTP_ADDR instead of :8080; the
//     server listens on free ports of 127.0.0.1 instead of 4222 and 8222; the all-in-one
//     gets -nats-port and -http after its CMD, keeping the CMD's -host 0.0.0.0, and
//     TOOLFLEET_OPS_ADDR=:<port>;
//   - paths: the JetStream store (/data/jetstream), the executor's sandbox (/sandbox, a
//     tmpfs) and the all-in-one's TMPDIR (where it keeps JetStream) become temporary
//     directories.
func TestComposeRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary and runs the compose services")
	}
	// The model: instead of OPENAI_API_KEY (docs/deployment.md), TOOLFLEET_MODEL names an offline
	// script that answers the compose file's example question, so no model is called.
	script := filepath.Join(t.TempDir(), "script.yaml")
	if err := os.WriteFile(script, []byte(composeScript), 0o600); err != nil {
		t.Fatal(err)
	}
	p := loadCompose(t, map[string]string{"TOOLFLEET_MODEL": "scripted/" + script})
	img := dockerfileImage(t)
	bin := buildBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	natsSvc, err := p.GetService("nats")
	if err != nil {
		t.Fatal(err)
	}
	mounts := map[string]string{}
	for _, v := range natsSvc.Volumes {
		mounts[v.Target] = v.Source
	}
	opts := loadConfig(t, string(readFile(t, mounts["/etc/nats/nats.conf"])), string(readFile(t, mounts["/etc/nats/auth.conf"])),
		argv(natsSvc, image{}), environment(natsSvc))
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", -1
	opts.StoreDir = t.TempDir()
	srv := startServer(t, opts)
	natsAddr := strings.TrimPrefix(srv.ClientURL(), "nats://")

	var ready []*process
	for _, part := range parts {
		svc, err := p.GetService(part)
		if err != nil {
			t.Fatal(err)
		}
		for replica := 1; replica <= svc.GetScale(); replica++ {
			environ := environment(svc)
			u, err := url.Parse(environ["TOOLFLEET_NATS_URL"])
			if err != nil || u.Host != "nats:4222" {
				t.Fatalf("%s: TOOLFLEET_NATS_URL %q, want the nats service", part, environ["TOOLFLEET_NATS_URL"])
			}
			u.Host = natsAddr
			environ["TOOLFLEET_NATS_URL"] = u.String()
			ops := "127.0.0.1:" + strconv.Itoa(nettest.FreePort(t))
			environ["TOOLFLEET_OPS_ADDR"] = ops
			if _, ok := environ["TOOLFLEET_HTTP_ADDR"]; ok {
				environ["TOOLFLEET_HTTP_ADDR"] = "127.0.0.1:" + strconv.Itoa(nettest.FreePort(t))
			}
			if environ["TOOLFLEET_SANDBOX_ROOT"] == "/sandbox" {
				environ["TOOLFLEET_SANDBOX_ROOT"] = t.TempDir()
			}
			pr := start(t, fmt.Sprintf("%s-%d", part, replica), bin, argv(svc, img), environ)
			pr.readyURL = "http://" + ops + "/readyz"
			ready = append(ready, pr)
		}
	}
	for _, pr := range ready {
		pr.waitReady(t)
	}
	for _, pr := range ready {
		if out, err := pr.run(t, bin, img.healthcheck); err != nil {
			t.Errorf("%s: the image's HEALTHCHECK %q failed: %v\n%s", pr.name, img.healthcheck, err, out)
		}
	}

	// docs/deployment.md: nats pub toolfleet.call.calculator '{"arguments":{"expression":"6*7"}}'
	// with the CloudEvents headers, then nats stream get TOOLFLEET_RESULTS --last-for
	// toolfleet.result.run1.call1, as the client user.
	cl, err := nats.Connect(srv.ClientURL(), nats.UserInfo("client", composePasswords["client"]))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	admin, err := nats.Connect(srv.ClientURL(), nats.UserInfo("admin", composePasswords["admin"]))
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	natstest.Eventually(t, 30*time.Second, "the executors' consumer of calculator", func() bool {
		_, err := admin.Request("$JS.API.CONSUMER.INFO."+events.StreamCalls+"."+events.ConsumerName("calculator"), nil, time.Second)
		return err == nil
	})
	call := nats.NewMsg("toolfleet.call.calculator")
	call.Data = []byte(`{"arguments":{"expression":"6*7"}}`)
	for _, h := range []string{"ce-specversion:1.0", "ce-id:call1", "ce-type:io.toolfleet.tool.call", "ce-source:/me", "ce-runid:run1", "Nats-Msg-Id:call1"} {
		k, v, _ := strings.Cut(h, ":")
		call.Header.Set(k, v)
	}
	if err := cl.PublishMsg(call); err != nil {
		t.Fatal(err)
	}
	if subj, err := events.ResultSubject("", "run1", "call1"); err != nil || subj != "toolfleet.result.run1.call1" {
		t.Fatalf("README's result subject is %s here (%v)", subj, err)
	}
	if _, err := cl.Request("$JS.API.STREAM.INFO."+events.StreamResults, nil, 5*time.Second); err != nil {
		t.Fatalf("client: stream info: %v", err)
	}
	var result events.Result
	natstest.Eventually(t, 30*time.Second, "the result of call1", func() bool {
		reply, err := cl.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+events.StreamResults, []byte(`{"last_by_subj":"toolfleet.result.run1.call1"}`))
		if err != nil {
			return false
		}
		var got struct {
			Message *struct {
				Data []byte `json:"data"`
			} `json:"message"`
		}
		return json.Unmarshal(reply.Data, &got) == nil && got.Message != nil && json.Unmarshal(got.Message.Data, &result) == nil
	})
	var out struct {
		Result json.Number `json:"result"`
	}
	if result.Status != events.StatusOK || json.Unmarshal(result.Output, &out) != nil || out.Result != "42" {
		t.Errorf("call1: %s %s, want ok with the result 42", result.Status, result.Output)
	}

	// The compose file's example: curl -s localhost:8080/v1/runs -H 'Content-Type:
	// application/json' -d '{"input":"What is 17*23?","tools":["calculator"],"wait":true}',
	// through the planner's API.
	planner := ready[len(ready)-1]
	if !strings.HasPrefix(planner.name, "planner") {
		t.Fatalf("the last part started is %s, want the planner", planner.name)
	}
	resp, err := http.Post("http://"+planner.environ["TOOLFLEET_HTTP_ADDR"]+"/v1/runs", "application/json",
		strings.NewReader(`{"input":"What is 17*23?","tools":["calculator"],"wait":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Status string `json:"status"`
		Answer string `json:"answer"`
		Calls  []struct {
			Name   string          `json:"name"`
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		} `json:"calls"`
	}
	err = json.NewDecoder(resp.Body).Decode(&run)
	resp.Body.Close()
	if err != nil || run.Answer != "391" || len(run.Calls) != 1 || run.Calls[0].Status != "ok" || !strings.Contains(string(run.Calls[0].Output), "391") {
		t.Errorf("POST /v1/runs: %s %+v (%v), want the answer 391 after one calculator call", resp.Status, run, err)
	}

	// The image run as it is (docker run toolfleet:dev): the all-in-one.
	t.Run("all-in-one", func(t *testing.T) {
		ops := strconv.Itoa(nettest.FreePort(t))
		natsPort, httpPort := nettest.FreePort(t), nettest.FreePort(t)
		args := append(append([]string(nil), img.entrypoint...), img.cmd...)
		args = append(args, "-nats-port", strconv.Itoa(natsPort), "-http", "0.0.0.0:"+strconv.Itoa(httpPort))
		environ := map[string]string{"TOOLFLEET_OPS_ADDR": ":" + ops, "TMPDIR": t.TempDir()}
		pr := start(t, "toolfleet", bin, args, environ)
		pr.readyURL = "http://127.0.0.1:" + ops + "/readyz"
		pr.waitReady(t)
		if out, err := pr.run(t, bin, img.healthcheck); err != nil {
			t.Errorf("all-in-one: HEALTHCHECK %q: %v\n%s", img.healthcheck, err, out)
		}
		// -host 0.0.0.0: NATS, the API and the ops port answer on an address other
		// than loopback, as they must for docker's port publishing.
		ip := outsideIP()
		if ip == "" {
			t.Log("no non-loopback IPv4 address on this host: all-interface binding not checked")
			return
		}
		for _, port := range []int{natsPort, httpPort} {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 2*time.Second)
			if err != nil {
				t.Errorf("all-in-one: nothing listens on %s:%d: %v", ip, port, err)
				continue
			}
			c.Close()
		}
	})
}

// composeScript is the planner's model in TestComposeRun: one calculator call, then the
// answer.
const composeScript = `
steps:
  - calls: [{name: calculator, arguments: {expression: "17*23"}}]
  - text: "391"
`

// process is one running part.
type process struct {
	name     string
	environ  map[string]string
	env      []string
	out      *opstest.Log
	done     chan struct{}
	err      error // of Wait, once done is closed
	readyURL string
}

// start runs argv, whose /usr/local/bin/<name> becomes bin/<name>, with exactly environ
// (and PATH), and stops it with SIGTERM when the test ends.
func start(t *testing.T, name, bin string, argv []string, environ map[string]string) *process {
	t.Helper()
	pr := &process{name: name, environ: environ, out: &opstest.Log{}, done: make(chan struct{}), env: []string{"PATH=" + os.Getenv("PATH")}}
	for k, v := range environ {
		pr.env = append(pr.env, k+"="+v)
	}
	cmd := exec.Command(inImage(t, bin, argv[0]), argv[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = pr.env, pr.out, pr.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { pr.err = cmd.Wait(); close(pr.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-pr.done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-pr.done
			t.Errorf("%s did not stop within 30s of SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("%s %q output:\n%s", name, argv, pr.out.String())
		}
	})
	return pr
}

// inImage maps a path of the image's /usr/local/bin to the binaries built for the test.
func inImage(t *testing.T, bin, path string) string {
	t.Helper()
	name, ok := strings.CutPrefix(path, "/usr/local/bin/")
	if !ok || strings.Contains(name, "/") {
		t.Fatalf("%s is not a binary of the image's /usr/local/bin", path)
	}
	return filepath.Join(bin, name)
}

// waitReady polls the process's readiness URL until it answers 200, failing early if
// the process exits.
func (pr *process) waitReady(t *testing.T) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	natstest.EventuallyNil(t, 60*time.Second, pr.name+" to be ready on "+pr.readyURL, func() error {
		select {
		case <-pr.done:
			t.Fatalf("%s exited (%v) before it was ready:\n%s", pr.name, pr.err, pr.out.String())
		default:
		}
		resp, err := hc.Get(pr.readyURL)
		if err != nil {
			return notReady{err, pr}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return notReady{errors.New(resp.Status), pr}
		}
		return nil
	})
}

// notReady is why a process is not ready yet, with what it printed (read when a test
// fails with it).
type notReady struct {
	why error
	pr  *process
}

func (e notReady) Error() string { return fmt.Sprintf("%v; it printed:\n%s", e.why, e.pr.out.String()) }

// run runs argv (an image path, like the HEALTHCHECK) in the process's environment, as
// docker exec does, and returns its output.
func (pr *process) run(t *testing.T, bin string, argv []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, inImage(t, bin, argv[0]), argv[1:]...)
	cmd.Env = pr.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// TestMain removes the binaries buildBinaries built, once every test that runs them is
// done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if buildDir != "" {
			_ = os.RemoveAll(buildDir)
		}
		os.Exit(code)
	}))
}

// buildBinaries builds every binary of the image, as the Dockerfile does, once per test
// process, and returns their directory (removed by TestMain).
func buildBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "toolfleet-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", buildDir+string(filepath.Separator),
			"./cmd/executor", "./cmd/picker", "./cmd/planner", "./cmd/toolfleet", "./cmd/toolfleet-sandbox")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// outsideIP is an IPv4 address of this host other than loopback, or "".
func outsideIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	return ""
}
