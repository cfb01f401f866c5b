package docstest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"gopkg.in/yaml.v3"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
)

// root is the repository's root, where go.mod is.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod two folders up: %v", err)
	}
	return dir
}

// docs returns README.md and docs/*.md (not docs/_incoming), relative to the root,
// README first, with their text.
func docs(t *testing.T, dir string) (names []string, texts map[string]string) {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(dir, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pages)
	texts = map[string]string{}
	for _, p := range append([]string{filepath.Join(dir, "README.md")}, pages...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(dir, p)
		names = append(names, name)
		texts[name] = string(b)
	}
	return names, texts
}

// snippets extracts every ```sh block of the docs; an unmarked block fails the test.
func snippets(t *testing.T, dir string) []Snippet {
	t.Helper()
	names, texts := docs(t, dir)
	var all []Snippet
	for _, name := range names {
		s, errs := Extract(name, texts[name])
		for _, err := range errs {
			t.Error(err)
		}
		all = append(all, s...)
	}
	return all
}

// Extract finds blocks and their marks, and refuses a block without one.
func TestExtract(t *testing.T) {
	text := "# t\n\n<!-- docstest: run -->\n```sh\necho one\n```\n\n```go\n```sh\n```\n" +
		"<!-- docstest: skip (needs docker) -->\n```sh\ndocker ps\n```\n\n```sh\nunmarked\n```\n" +
		"<!-- docstest: skip -->\n```sh\nno reason\n```\n" +
		"<!-- docstest: run; expect \"a \\\"b\\\"\" \"c\" -->\n```sh\necho\n```\n"
	got, errs := Extract("x.md", text)
	want := []Snippet{
		{File: "x.md", Line: 4, Text: "echo one\n", Run: true},
		{File: "x.md", Line: 12, Text: "docker ps\n", Skip: "needs docker"},
		{File: "x.md", Line: 16, Text: "unmarked\n"},
		{File: "x.md", Line: 20, Text: "no reason\n"},
		{File: "x.md", Line: 24, Text: "echo\n", Run: true, Expect: []string{`a "b"`, "c"}},
	}
	if !slices.EqualFunc(got, want, func(a, b Snippet) bool {
		return a.File == b.File && a.Line == b.Line && a.Text == b.Text && a.Run == b.Run && a.Skip == b.Skip && slices.Equal(a.Expect, b.Expect)
	}) {
		t.Errorf("Extract:\n got %+v\nwant %+v", got, want)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "x.md:16: a ```sh block without a mark") ||
		!strings.Contains(errs[1].Error(), "x.md:20:") {
		t.Errorf("Extract errors: %v, want x.md:16 and x.md:20 unmarked", errs)
	}
	if _, errs := Extract("y.md", "<!-- docstest: run -->\n```sh\necho\n"); len(errs) != 1 || !strings.Contains(errs[0].Error(), "never closed") {
		t.Errorf("an unclosed block: %v", errs)
	}
}

// The API reference lists exactly the operations of the OpenAPI document, each as a
// heading "### `METHOD /path`".
func TestAPIDocMatchesOpenAPI(t *testing.T) {
	dir := root(t)
	raw, err := os.ReadFile(filepath.Join(dir, "internal/planner/plannerapi/openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var inSpec []string
	for path, ops := range doc.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				inSpec = append(inSpec, strings.ToUpper(method)+" "+path)
			}
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var inDoc []string
	for _, m := range regexp.MustCompile("(?m)^### `([A-Z]+ /[^`]*)`$").FindAllStringSubmatch(string(page), -1) {
		inDoc = append(inDoc, m[1])
	}
	sort.Strings(inSpec)
	sort.Strings(inDoc)
	if len(inSpec) == 0 {
		t.Fatal("openapi.yaml has no operations")
	}
	for _, op := range inSpec {
		if !slices.Contains(inDoc, op) {
			t.Errorf("docs/api.md lacks %s of openapi.yaml (add a heading ### `%s`)", op, op)
		}
	}
	for _, op := range inDoc {
		if !slices.Contains(inSpec, op) {
			t.Errorf("docs/api.md documents %s, which openapi.yaml does not have", op)
		}
	}
}

// Every curl that sends a body says it is JSON: the API answers 415 without it. The
// Kubernetes guide's curls count too.
func TestCurlExamplesSendContentType(t *testing.T) {
	dir := root(t)
	names, texts := docs(t, dir)
	compose, err := os.ReadFile(filepath.Join(dir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	names, texts["docker-compose.yml"] = append(names, "docker-compose.yml"), string(compose)
	k8s, err := os.ReadFile(filepath.Join(dir, "deploy", "k8s", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names, texts["deploy/k8s/README.md"] = append(names, "deploy/k8s/README.md"), string(k8s)
	n := 0
	for _, name := range names {
		for _, cmd := range CurlPosts(texts[name]) {
			n++
			if !strings.Contains(cmd, "Content-Type: application/json") {
				t.Errorf("%s: a curl sending a body without -H 'Content-Type: application/json' (answered 415): %s", name, cmd)
			}
		}
	}
	if n == 0 {
		t.Error("no curl with a body found: the search is broken")
	}
}

// fleet is a `toolfleet dev` process for the snippets.
type fleet struct {
	api, nats, ops string // host:port each
	bin            string // the folder of the toolfleet binary
}

// startDev builds toolfleet and starts `toolfleet dev` on free ports with the scripted
// model; it is stopped with SIGINT when the test ends, and must exit 0.
func startDev(t *testing.T, dir string) fleet {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "toolfleet"), "./cmd/toolfleet")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/toolfleet: %v\n%s", err, out)
	}
	f := fleet{api: "127.0.0.1:" + strconv.Itoa(nettest.FreePort(t)), bin: bin}
	natsPort := nettest.FreePort(t)
	f.nats, f.ops = "127.0.0.1:"+strconv.Itoa(natsPort), "127.0.0.1:"+strconv.Itoa(nettest.FreePort(t))
	cmd := exec.Command(filepath.Join(bin, "toolfleet"), "dev", "-http", f.api, "-nats-port", strconv.Itoa(natsPort),
		"-ops-addr", f.ops, "-data", t.TempDir())
	cmd.Env = append(os.Environ(), "TOOLFLEET_MODEL=", "TOOLFLEET_API_TOKEN=", "TOOLFLEET_API_TOKENS_FILE=", "TOOLFLEET_TOOLS_FILE=",
		"TOOLFLEET_PRICES_FILE=", "TOOLFLEET_LOG_LEVEL=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("toolfleet dev: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("toolfleet dev did not stop within 30s of SIGINT\n%s", logs.String())
		}
	})
	natstest.Eventually(t, time.Minute, "toolfleet dev is ready", func() bool {
		res, err := http.Get("http://" + f.ops + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return f
}

// Every runnable shell snippet of the docs exits 0 against a real dev fleet, and every
// pick request the docs show finds a tool in dev's catalog.
func TestSnippets(t *testing.T) {
	dir := root(t)
	all := snippets(t, dir)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed: the docs' snippets need it (apt-get install curl; .ci/run installs it)")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is not installed: the docs' snippets are bash")
	}
	f := startDev(t, dir)
	// The CLI must not read the user's context file (XDG_CONFIG_HOME), and go must keep
	// the user's own settings and caches, which it finds from the same variables.
	goenv, err := exec.Command("go", "env", "GOENV").Output()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+f.bin+string(os.PathListSeparator)+os.Getenv("PATH"), "GOBIN="+f.bin,
		"GOENV="+strings.TrimSpace(string(goenv)), "TOOLFLEET_API_URL=http://"+f.api, "TOOLFLEET_NATS_URL=nats://"+f.nats,
		"TOOLFLEET_OPS_ADDR="+f.ops, "TOOLFLEET_API_TOKEN=", "TOOLFLEET_CONTEXT=", "XDG_CONFIG_HOME="+t.TempDir())
	addresses := strings.NewReplacer("localhost:8080", f.api, "127.0.0.1:8080", f.api, "127.0.0.1:4222", f.nats,
		"127.0.0.1:9090", f.ops)
	ran := 0
	var skipped []string
	for _, s := range all {
		if !s.Run {
			if s.Skip != "" {
				skipped = append(skipped, s.Name()+": "+s.Skip)
			}
			continue
		}
		ran++
		t.Run(s.Name(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-e", "-c", addresses.Replace(s.Text))
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v (%v)\n--- snippet:\n%s--- output:\n%s", s.Name(), err, ctx.Err(), s.Text, out)
			}
			for _, want := range s.Expect {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s: the output lacks %q\n--- output:\n%s", s.Name(), want, out)
				}
			}
		})
	}
	if ran == 0 {
		t.Error("no runnable snippet found")
	}
	t.Logf("%d snippets ran; %d skipped:\n  %s", ran, len(skipped), strings.Join(skipped, "\n  "))

	// The pick requests the docs show for the nats CLI, sent as it would.
	nc, err := nats.Connect("nats://" + f.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	names, texts := docs(t, dir)
	picks := 0
	for _, name := range names {
		for _, req := range PickRequests(texts[name]) {
			picks++
			msg, err := nc.Request("toolfleet.picker.pick", []byte(req), 10*time.Second)
			if err != nil {
				t.Errorf("%s: nats req toolfleet.picker.pick '%s': %v", name, req, err)
				continue
			}
			var answer struct {
				Results []struct {
					Name string `json:"name"`
				} `json:"results"`
			}
			if err := json.Unmarshal(msg.Data, &answer); err != nil || len(answer.Results) == 0 {
				t.Errorf("%s: nats req toolfleet.picker.pick '%s' finds nothing in dev's catalog: %s", name, req, msg.Data)
			}
		}
	}
	if picks == 0 {
		t.Error("the docs show no pick request: the search is broken")
	}
}
