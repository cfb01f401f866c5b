package inspector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/cmd/toolfleet/toolfleetcli"
	"github.com/toolfleet/toolfleet/internal/apiauth"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The tokens of the fleet the browser tests use: three tenants (initech's runs are
// the pause and badge tests', which need a tenant nothing else waits in).
const (
	acmeToken    = "acme-s3cret"
	globexToken  = "globex-s3cret"
	initechToken = "initech-s3cret"
)

// demoRun is the request of the demo's run (the dev command prints it): the scripted
// model stops at write_file, which waits for an approval.
var demoRun = map[string]any{
	"input": "Two orders came in, for 17 and 25 widgets at 2 credits each. Work out the total, write it to report.txt in the workspace, and check the file.",
	"tools": []string{"get_time", "list_dir", "calculator", "write_file", "read_file"},
}

// fleet is a dev fleet (toolfleet dev: the all-in-one fleet on an embedded server with
// its scripted demo model) with the inspector, and a headless Chromium to look at it.
type fleet struct {
	addrs   toolfleetcli.DevAddrs
	browser context.Context
	lists   bool // whether the planner has the list API (GET /v1/runs)
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	chromium := os.Getenv("TOOLFLEET_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(chromium); err != nil {
		t.Skipf("no Chromium at %s (install Debian's chromium, or set TOOLFLEET_CHROMIUM): %v", chromium, err)
	}
	t.Setenv("TOOLFLEET_MODEL", "")
	ctx, cancel := context.WithCancel(context.Background())
	ready, failed := make(chan toolfleetcli.DevAddrs, 1), make(chan error, 1)
	tokens := map[string]events.Identity{
		apiauth.HashToken(acmeToken):    {Tenant: "acme", Role: "admin"},
		apiauth.HashToken(globexToken):  {Tenant: "globex", Role: "admin"},
		apiauth.HashToken(initechToken): {Tenant: "initech", Role: "admin"},
	}
	go func() {
		failed <- toolfleetcli.Dev(ctx, toolfleetcli.DevOptions{HTTPAddr: "127.0.0.1:0", Tokens: tokens, Out: io.Discard,
			Fleet: toolfleetcli.Options{NATSPort: -1}, Ready: func(a toolfleetcli.DevAddrs) { ready <- a }})
	}()
	f := &fleet{}
	select {
	case f.addrs = <-ready:
	case err := <-failed:
		cancel()
		t.Fatalf("dev stopped before it served: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("dev not ready after 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-failed; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("dev: %v", err)
		}
	})
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // starts Chromium
		t.Fatalf("start chromium: %v", err)
	}
	f.browser = browser
	res, _ := f.api(t, acmeToken, "GET", "/v1/runs?limit=1", nil)
	f.lists = res == http.StatusOK
	return f
}

// api calls the planner's API as the holder of token.
func (f *fleet) api(t *testing.T, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.addrs.API+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// startDemo starts the demo's run as token's holder, with the request's other fields
// in more, and waits until its write_file waits for an approval; it returns the run's
// id.
func (f *fleet) startDemo(t *testing.T, token string, more ...map[string]any) string {
	t.Helper()
	req := map[string]any{"wait": true, "waitTimeout": "100ms"}
	for k, v := range demoRun {
		req[k] = v
	}
	for _, m := range more {
		for k, v := range m {
			req[k] = v
		}
	}
	status, run := f.api(t, token, "POST", "/v1/runs", req)
	id, _ := run["id"].(string)
	if status/100 != 2 || id == "" {
		t.Fatalf("start the demo run: %d %v", status, run)
	}
	natstest.EventuallyNil(t, 30*time.Second, "demo run "+id+" to wait for an approval", func() error {
		if _, run := f.api(t, token, "GET", "/v1/runs/"+id, nil); !strings.Contains(fmt.Sprint(run["calls"]), "awaiting_approval") {
			return fmt.Errorf("its calls are %v", run["calls"])
		}
		return nil
	})
	return id
}

// tab opens a browser tab holding token (or none) in its session, as the token page
// keeps it, and shows the page at fragment. On failure it leaves a screenshot of the
// page in the test's artifact directory (go test -artifacts keeps it).
func (f *fleet) tab(t *testing.T, token, fragment string) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(f.browser)
	t.Cleanup(cancel)
	// Open the tab with its own context: a tab lives as long as the context of its
	// first action.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, c := context.WithTimeout(tab, 10*time.Second)
		defer c()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: a PNG
		if err != nil {
			t.Logf("no screenshot: %v", err)
			return
		}
		name := filepath.Join(t.ArtifactDir(), strings.NewReplacer("/", "_", "#", "").Replace(fragment)+".png")
		if err := os.WriteFile(name, png, 0o644); err == nil {
			t.Logf("screenshot of the page: %s", name)
		}
	})
	f.run(t, tab, chromedp.Navigate(f.addrs.UI+"#/none"),
		js(fmt.Sprintf(`sessionStorage.setItem('toolfleet.token', %q)`, token), nil),
		chromedp.Reload())
	f.goTo(t, tab, fragment)
	return tab
}

// goTo shows the view at fragment, as following a link does.
func (f *fleet) goTo(t *testing.T, tab context.Context, fragment string) {
	t.Helper()
	f.run(t, tab, js(fmt.Sprintf(`location.hash = %q`, fragment), nil))
}

// until waits until the JavaScript expression is true on the page.
func (f *fleet) until(t *testing.T, tab context.Context, expr string) {
	t.Helper()
	poll := chromedp.Poll[any](expr, chromedp.WithPollingInterval(50*time.Millisecond))
	f.run(t, tab, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error { _, err := poll(ctx, tg); return err }))
}

// run runs browser actions with a time limit.
func (f *fleet) run(t *testing.T, tab context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("in the browser: %v", err)
	}
}

// js evaluates a JavaScript expression on the page and stores its value in dest (when
// not nil), as encoding/json would.
func js(expr string, dest any) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		v, err := chromedp.Evaluate[any](expr)(ctx, tg)
		if err != nil || dest == nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, dest)
	})
}

// text returns the text of the first element matching sel, once there is one. The
// element is found and read in one evaluation: a view that renders it again between a
// query and a read (chromedp.Text's two steps) would answer "No node with given id
// found".
func (f *fleet) text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	read := chromedp.Poll[[]string](fmt.Sprintf(`(e => e ? [e.innerText] : null)(document.querySelector(%q))`, sel),
		chromedp.WithPollingInterval(50*time.Millisecond))
	s, err := chromedp.Run(ctx, read)
	if err != nil || len(s) != 1 {
		t.Fatalf("the text of %s: %v", sel, err)
	}
	return s[0]
}

// apiList calls GET path, whose answer is a JSON array.
func (f *fleet) apiList(t *testing.T, token, path string) (int, []any) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.addrs.API+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Errorf("GET %s: %v", path, err)
	}
	return res.StatusCode, out
}

func (f *fleet) needLists(t *testing.T) {
	t.Helper()
	if !f.lists {
		t.Skip("this planner has no list API yet (GET /v1/runs answers 404): the list pages cannot be tested")
	}
}

func TestInspectorInBrowser(t *testing.T) {
	f := startFleet(t)

	t.Run("demo run: timeline of every call, approve, completes live", func(t *testing.T) {
		id := f.startDemo(t, acmeToken)
		tab := f.tab(t, acmeToken, "/runs/"+id)
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`.wf-row[data-call]`)))
		_, run := f.api(t, acmeToken, "GET", "/v1/runs/"+id, nil)
		calls, _ := run["calls"].([]any)
		var rows, parked, withBars int
		f.run(t, tab, js(`document.querySelectorAll('.wf-row[data-call]').length`, &rows),
			js(`document.querySelectorAll('.wf-row[data-call] .bar.park').length`, &parked),
			js(`[...document.querySelectorAll('.wf-row[data-call]')].filter(r => r.querySelector('.bar')).length`, &withBars))
		if rows != len(calls) || withBars != len(calls) || parked != 1 || len(calls) != 5 {
			t.Fatalf("the timeline shows %d calls (%d with bars, %d parked), the run has %d", rows, withBars, parked, len(calls))
		}
		// The invalid calculator call shows the validator's messages with their pointers.
		f.run(t, tab, chromedp.Click(chromedp.CSS(`details.call:nth-child(3) > summary`)),
			chromedp.WaitVisible(chromedp.CSS(`details.call:nth-child(3) .error-box li code`)))
		if s := f.text(t, tab, `details.call:nth-child(3) .error-box`); !strings.Contains(s, "missing property 'expression'") {
			t.Errorf("the invalid call's error: %q", s)
		}
		// Approve the parked write_file from the page: the run completes, live.
		f.run(t, tab, chromedp.Click(chromedp.CSS(`[data-action="approve"]`)),
			chromedp.WaitVisible(chromedp.CSS(`section[aria-label="head"] .status.completed`)))
		if s := f.text(t, tab, `section[aria-label="head"]`); !strings.Contains(s, "I wrote it to report.txt") {
			t.Errorf("the completed run's answer is not shown: %q", s)
		}
		// read_file, the next step's call, joins the timeline.
		f.until(t, tab, `document.querySelectorAll('.wf-row[data-call]').length === 6`)
	})

	t.Run("modified arguments are refused when invalid, then deny", func(t *testing.T) {
		id := f.startDemo(t, acmeToken)
		tab := f.tab(t, acmeToken, "/runs/"+id)
		f.run(t, tab, chromedp.Click(chromedp.CSS(`[data-action="modify"]`)),
			chromedp.WaitVisible(chromedp.CSS(`textarea.args-editor`)),
			chromedp.SetValue(chromedp.CSS(`textarea.args-editor`), `{"path": 7}`),
			js(`document.querySelector('textarea.args-editor').dispatchEvent(new Event('input'))`, nil))
		if s := f.text(t, tab, `.diff`); !strings.Contains(s, `+   "path": 7`) || !strings.Contains(s, `-   "content"`) {
			t.Errorf("the diff of the edit: %q", s)
		}
		f.run(t, tab, chromedp.Click(chromedp.CSS(`[data-action="approve-modified"]`)),
			chromedp.WaitVisible(chromedp.CSS(`.approval .error-box li`)))
		if s := f.text(t, tab, `.approval .error-box`); !strings.HasPrefix(s, "400") || !strings.Contains(s, "/path") {
			t.Errorf("the refusal of invalid arguments: %q", s)
		}
		f.run(t, tab, chromedp.SetValue(chromedp.CSS(`.approval-reason`), "not today"),
			chromedp.Click(chromedp.CSS(`[data-action="deny"]`)),
			chromedp.WaitVisible(chromedp.CSS(`section[aria-label="head"] .status.completed`)))
		if s := f.text(t, tab, `section[aria-label="head"]`); !strings.Contains(s, "was not approved") {
			t.Errorf("the denied run's answer: %q", s)
		}
		if s := f.text(t, tab, `details.call:nth-child(5) > summary`); !strings.Contains(s, "denied") {
			t.Errorf("the denied call: %q", s)
		}
	})

	t.Run("cancel a running run", func(t *testing.T) {
		id := f.startDemo(t, acmeToken)
		tab := f.tab(t, acmeToken, "/runs/"+id)
		f.run(t, tab, chromedp.WaitEnabled(chromedp.CSS(`#cancel-run`)),
			chromedp.Click(chromedp.CSS(`#cancel-run`)), chromedp.Click(chromedp.CSS(`#cancel-run`)),
			chromedp.WaitVisible(chromedp.CSS(`section[aria-label="head"] .status.canceled`)))
		if _, run := f.api(t, acmeToken, "GET", "/v1/runs/"+id, nil); run["termination"] != "canceled" {
			t.Errorf("the run after cancel: %v %v", run["status"], run["termination"])
		}
	})

	t.Run("runs list: the run, and a new one appears live", func(t *testing.T) {
		f.needLists(t)
		first := f.startDemo(t, acmeToken)
		tab := f.tab(t, acmeToken, "/runs")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q]`, first))))
		second := f.startDemo(t, acmeToken)
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q]`, second))))
		// The run's row opens its page.
		f.run(t, tab, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q] a`, second))),
			chromedp.WaitVisible(chromedp.CSS(`.wf-row[data-call]`)))
		// The approvals inbox lists the parked call with its countdown.
		f.goTo(t, tab, "/approvals")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`article[data-call^=%q] .countdown`, second+"-"))))
		if s := f.text(t, tab, fmt.Sprintf(`article[data-call^=%q] .countdown`, second+"-")); !strings.HasPrefix(s, "expires in") {
			t.Errorf("the countdown: %q", s)
		}
	})

	t.Run("fleet: tools and a dead letter", func(t *testing.T) {
		f.needLists(t)
		nc, err := nats.Connect(f.addrs.NATS)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		// A message with no CloudEvents attributes names no caller: its only answer is a
		// dead letter.
		subject, _ := events.CallSubject(events.Identity{Tenant: "acme", Role: "admin"}, "calculator")
		if err := nc.Publish(subject, []byte(`not a call`)); err != nil {
			t.Fatal(err)
		}
		tab := f.tab(t, acmeToken, "/fleet")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`tr[data-tool="calculator"]`)))
		deadline := time.Now().Add(20 * time.Second)
		for {
			var n int
			f.run(t, tab, js(`document.querySelectorAll('tr[data-seq]').length`, &n))
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no dead letter on the fleet page")
			}
			f.run(t, tab, chromedp.Click(chromedp.CSS(`main button`)), chromedp.Sleep(200*time.Millisecond)) // Refresh
		}
		if s := f.text(t, tab, `tr[data-seq]`); !strings.Contains(s, "calculator") {
			t.Errorf("the dead letter: %q", s)
		}
	})

	t.Run("the approvals badge: hidden at 0, live, hidden again", func(t *testing.T) {
		tab := f.tab(t, initechToken, "/runs")
		const badge = `document.getElementById('pending-count')`
		f.until(t, tab, badge+`.textContent === '0'`)
		var shown string
		f.run(t, tab, js(`getComputedStyle(`+badge+`).display`, &shown))
		if shown != "none" {
			t.Errorf("the badge with no pending approval: display %s, want none", shown)
		}
		// A run that waits for an approval: the badge says so, with no reload.
		id := f.startDemo(t, initechToken)
		f.until(t, tab, badge+`.textContent === '1' && getComputedStyle(`+badge+`).display !== 'none'`)
		// The inbox lists what the badge counts.
		f.goTo(t, tab, "/approvals")
		f.until(t, tab, fmt.Sprintf(`document.querySelectorAll('article[data-call^=%q]').length === 1`, id+"-"))
		f.run(t, tab, js(badge+`.textContent`, &shown))
		if shown != "1" {
			t.Errorf("the badge says %s beside an inbox of 1", shown)
		}
		// Answered elsewhere (the API): the badge hides again, live.
		_, run := f.api(t, initechToken, "GET", "/v1/runs/"+id, nil)
		var call string
		for _, c := range run["calls"].([]any) {
			if c := c.(map[string]any); c["status"] == "awaiting_approval" {
				call = c["id"].(string)
			}
		}
		if status, body := f.api(t, initechToken, "POST", "/v1/approvals/"+call, map[string]any{"decision": "approve"}); status != http.StatusAccepted {
			t.Fatalf("approve %s: %d %v", call, status, body)
		}
		f.goTo(t, tab, "/runs")
		f.until(t, tab, `getComputedStyle(`+badge+`).display === 'none'`)
	})

	t.Run("pause and resume with edits, the pause's reason and actor, its clock stopped", func(t *testing.T) {
		id := f.startDemo(t, initechToken, map[string]any{"metadata": map[string]string{"ticket": "T-42"}})
		tab := f.tab(t, initechToken, "/runs/"+id)
		if s := f.text(t, tab, `[data-fact="metadata"]`); s != "ticket=T-42" {
			t.Errorf("the run's metadata: %q", s)
		}
		// Pause from the page: requested now, taken at the step boundary once the parked
		// call is answered.
		f.run(t, tab, chromedp.WaitEnabled(chromedp.CSS(`#pause-run`)),
			chromedp.SendKeys(chromedp.CSS(`#pause-reason`), "look first"), chromedp.Click(chromedp.CSS(`#pause-run`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-fact="pause-requested"]`)))
		if s := f.text(t, tab, `[data-fact="pause-requested"]`); !strings.Contains(s, "by initech/admin: look first") {
			t.Errorf("the pause request: %q", s)
		}
		f.run(t, tab, chromedp.Click(chromedp.CSS(`[data-action="approve"]`)),
			chromedp.WaitVisible(chromedp.CSS(`section[aria-label="head"] .status.paused`)),
			chromedp.WaitVisible(chromedp.CSS(`#resume li[data-index]`)))
		if s := f.text(t, tab, `[data-fact="paused"]`); !strings.Contains(s, "asked by initech/admin: look first") {
			t.Errorf("the pause: %q", s)
		}
		// A paused run's clock stands still: ten minutes later, the page says the same.
		var took, axis, later, laterAxis string
		f.run(t, tab, js(`document.querySelector('[data-fact="duration"]').textContent`, &took),
			js(`document.querySelector('.wf-axis .end').textContent`, &axis),
			js(`(() => { const real = Date.now; Date.now = () => real() + 600000; })()`, nil))
		f.goTo(t, tab, "/runs/"+id+"?again=1")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`#resume li[data-index]`)),
			js(`document.querySelector('[data-fact="duration"]').textContent`, &later),
			js(`document.querySelector('.wf-axis .end').textContent`, &laterAxis))
		if took == "" || later != took || laterAxis != axis {
			t.Errorf("paused, ten minutes later: ran for %q then %q, the axis %q then %q", took, later, axis, laterAxis)
		}
		// The resume form lists the conversation as the model will be asked it.
		status, model := f.apiList(t, initechToken, "/v1/runs/"+id+"/messages?view=model")
		var rows int
		f.run(t, tab, js(`document.querySelectorAll('#resume li[data-index]').length`, &rows))
		if status != http.StatusOK || rows != len(model) {
			t.Fatalf("the resume form lists %d messages, the model's view has %d (%d)", rows, len(model), status)
		}
		// Dropping a call's result alone leaves the call unanswered: the API says no.
		last := len(model) - 1
		f.run(t, tab, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#resume input[data-drop="%d"]`, last))),
			chromedp.Click(chromedp.CSS(`#resume-run`)), chromedp.WaitVisible(chromedp.CSS(`#resume .error-box`)))
		if s := f.text(t, tab, `#resume .error-box`); !strings.HasPrefix(s, "400") || !strings.Contains(s, "not one a model takes") {
			t.Errorf("an edit that breaks the conversation: %q", s)
		}
		// Drop the call with its result, add a message and a limit: the run goes on (the
		// scripted model, its write dropped, writes the report again).
		f.run(t, tab, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#resume input[data-drop="%d"]`, last-1))),
			chromedp.SendKeys(chromedp.CSS(`#resume-input`), "Check the report now."),
			chromedp.SendKeys(chromedp.CSS(`#resume-max-steps`), "20"),
			chromedp.Click(chromedp.CSS(`#resume-run`)),
			// running, or already waiting for the report's approval
			chromedp.WaitVisible(chromedp.CSS(`section[aria-label="head"] :is(.status.running, .status.awaiting_approval)`)))
		_, msgs := f.apiList(t, initechToken, "/v1/runs/"+id+"/messages")
		if !strings.Contains(fmt.Sprint(msgs), "Check the report now.") {
			t.Errorf("the resumed run's conversation lacks the message added: %v", msgs)
		}
		if _, run := f.api(t, initechToken, "GET", "/v1/runs/"+id, nil); run["status"] != "running" && run["status"] != "awaiting_approval" || run["paused"] != nil {
			t.Errorf("the run after resume: %v, paused %v", run["status"], run["paused"])
		}
		f.api(t, initechToken, "POST", "/v1/runs/"+id+"/cancel", nil)
	})

	t.Run("a long wait is collapsed: the other bars stay readable", func(t *testing.T) {
		id := f.startDemo(t, initechToken)
		tab := f.tab(t, initechToken, "/runs/"+id)
		// Four minutes of waiting for the approval, on the page's clock.
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`.wf-row[data-call] .bar.park`)),
			js(`(() => { const real = Date.now; Date.now = () => real() + 240000; })()`, nil))
		f.goTo(t, tab, "/runs/"+id+"?later=1")
		f.until(t, tab, `document.querySelector('.wf-axis .gap-label') !== null`)
		var share float64
		var gap string
		f.run(t, tab, js(`(() => { const b = document.querySelector('.wf-row[data-call] .bar.park'); return b.getBoundingClientRect().width / b.parentElement.getBoundingClientRect().width; })()`, &share),
			js(`document.querySelector('.wf-axis .gap-label').textContent`, &gap))
		if share > 0.5 || !strings.HasPrefix(gap, "+4m") {
			t.Errorf("a 4-minute approval wait takes %.0f%% of its track (want the wait collapsed), marked %q", share*100, gap)
		}
		// The call's own time is told apart from its wait for a person.
		label := f.text(t, tab, `.wf-row[data-call]:has(.bar.park) .wf-label`)
		if !regexp.MustCompile(`^write_file awaiting_approval [0-9.]+ m?s \+ 4m \d+s approval wait$`).MatchString(label) {
			t.Errorf("the parked call's label: %q, want its time and the approval wait apart", label)
		}
		f.api(t, initechToken, "POST", "/v1/runs/"+id+"/cancel", nil)
	})

	t.Run("390 px: a large JSON result wraps, labels are whole, nothing scrolls sideways", func(t *testing.T) {
		row := map[string]any{"order": 1, "widgets": 17, "note": strings.Repeat("averyveryverylongtokenwithoutanyspace", 8)}
		rows := make([]any, 60)
		for i := range rows {
			rows[i] = row
		}
		value, err := json.Marshal(map[string]any{"rows": rows})
		if err != nil {
			t.Fatal(err)
		}
		status, run := f.api(t, acmeToken, "POST", "/v1/runs", map[string]any{"model": "scripted/echo", "tools": []string{"echo", "get_time"},
			"input": `get_time and echo {"value": ` + string(value) + `}`, "wait": true})
		id, _ := run["id"].(string)
		if status != http.StatusOK || run["termination"] != "completed" {
			t.Fatalf("the echo run: %d %v %v", status, run["termination"], run["detail"])
		}
		tab := f.tab(t, acmeToken, "/runs/"+id)
		f.run(t, tab, chromedp.EmulateViewport(390, 844), chromedp.WaitVisible(chromedp.CSS(`.wf-row[data-call]`)))
		// The echo call's output is over 4 KiB: it opens on demand.
		f.run(t, tab, chromedp.Click(chromedp.CSS(`details.call:nth-child(2) > summary`)),
			chromedp.WaitVisible(chromedp.CSS(`details.call:nth-child(2) .body button`)),
			js(`[...document.querySelectorAll('details.call:nth-child(2) .body button')].find(b => b.textContent.startsWith('Show output')).click()`, nil),
			chromedp.WaitVisible(chromedp.CSS(`details.call:nth-child(2) pre[aria-label="output"]`)))
		// Pictures of the page at 390 px (go test -artifacts keeps them): its top, the
		// timeline, the output.
		for name, shot := range map[string]chromedp.Action[[]byte]{
			"run-390px-top.png":      chromedp.CaptureScreenshot(),
			"run-390px-timeline.png": chromedp.Screenshot(chromedp.CSS(`section[aria-label="timeline"]`)),
			"run-390px-output.png":   chromedp.Screenshot(chromedp.CSS(`details.call:nth-child(2)`)),
		} {
			ctx, cancel := context.WithTimeout(tab, 20*time.Second)
			png, err := chromedp.Run(ctx, shot)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(t.ArtifactDir(), name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var width int
		var cut []string
		var underline string
		f.run(t, tab, js(`document.documentElement.scrollWidth`, &width),
			js(`[...document.querySelectorAll('.wf-label')].filter(l => l.scrollWidth > l.clientWidth + 1).map(l => l.textContent)`, &cut),
			js(`getComputedStyle(document.querySelector('.wf-label a')).textUnderlineOffset`, &underline))
		if width > 390 {
			t.Errorf("at 390 px the run page is %d px wide", width)
		}
		if len(cut) > 0 {
			t.Errorf("timeline labels cut: %q", cut)
		}
		if underline == "auto" || underline == "" {
			t.Errorf("tool links are underlined on their underscores (text-underline-offset %q)", underline)
		}
	})

	t.Run("the runs list tells a clean run from a failed and a denied one", func(t *testing.T) {
		f.needLists(t)
		echo := func(tools []string, input string) string {
			status, run := f.api(t, acmeToken, "POST", "/v1/runs", map[string]any{"model": "scripted/echo", "tools": tools, "input": input, "wait": true})
			id, _ := run["id"].(string)
			if status != http.StatusOK || run["termination"] != "completed" {
				t.Fatalf("the echo run %q: %d %v %v", input, status, run["termination"], run["detail"])
			}
			return id
		}
		clean := echo([]string{"get_time"}, "get_time")
		failed := echo([]string{"read_file"}, `read_file {"path": "no-such-file.txt"}`)
		if _, run := f.api(t, acmeToken, "GET", "/v1/runs/"+failed, nil); !strings.Contains(fmt.Sprint(run["calls"]), "status:error") {
			t.Fatalf("the read of a missing file did not fail: %v", run["calls"])
		}
		denied := f.startDemo(t, acmeToken)
		_, run := f.api(t, acmeToken, "GET", "/v1/runs/"+denied, nil)
		for _, c := range run["calls"].([]any) {
			if c := c.(map[string]any); c["status"] == "awaiting_approval" {
				if status, body := f.api(t, acmeToken, "POST", "/v1/approvals/"+c["id"].(string), map[string]any{"decision": "deny"}); status != http.StatusAccepted {
					t.Fatalf("deny: %d %v", status, body)
				}
			}
		}
		tab := f.tab(t, acmeToken, "/runs")
		row := func(id string) string { return fmt.Sprintf(`document.querySelector('tr[data-run=%q]')`, id) }
		f.until(t, tab, row(denied)+` && `+row(denied)+`.querySelector('.status').textContent === 'completed'`)
		// Each row says when its run finished.
		for _, id := range []string{clean, failed, denied} {
			if s := f.text(t, tab, fmt.Sprintf(`tr[data-run=%q] [data-fact="finished"]`, id)); s == "" {
				t.Errorf("the row of %s has no finish time", id)
			}
		}
		// The outcome and its counts, when the API's list gives them.
		_, page := f.api(t, acmeToken, "GET", "/v1/runs?limit=5", nil)
		if first, _ := page["runs"].([]any)[0].(map[string]any); first["outcome"] == nil {
			t.Skip("the API's list gives no outcome yet: the colors and counts are not checked")
		}
		looks := map[string][3]string{} // outcome, background, counts
		for _, id := range []string{clean, failed, denied} {
			var got []string
			f.run(t, tab, js(fmt.Sprintf(`(r => { const s = r.querySelector('.status'); const n = r.querySelector('[data-fact="outcome"]');
				return [s.dataset.outcome || '', getComputedStyle(s).backgroundColor, n ? n.textContent : '', r.querySelector('[data-fact="took"]').textContent]; })(%s)`, row(id)), &got))
			looks[id] = [3]string{got[0], got[1], got[2]}
			if got[3] == "" {
				t.Errorf("the row of %s has no duration", id)
			}
		}
		want := map[string][3]string{clean: {"clean", "", ""}, failed: {"tool_errors", "", "1 tool error"}, denied: {"denied", "", "1 denied"}}
		for id, w := range want {
			if g := looks[id]; g[0] != w[0] || g[2] != w[2] {
				t.Errorf("run %s: outcome %q counts %q, want %q %q", id, g[0], g[2], w[0], w[2])
			}
		}
		if looks[clean][1] == looks[failed][1] || looks[clean][1] == looks[denied][1] || looks[failed][1] == looks[denied][1] {
			t.Errorf("the three outcomes look alike: %v", looks)
		}
	})

	t.Run("a run waiting for a person is listed as waiting, with its deadline", func(t *testing.T) {
		f.needLists(t)
		id := f.startDemo(t, globexToken)
		if _, run := f.api(t, globexToken, "GET", "/v1/runs/"+id, nil); run["status"] != "awaiting_approval" {
			t.Skipf("the API says %v of a run that waits for an approval: awaiting_approval not served yet", run["status"])
		}
		tab := f.tab(t, globexToken, "/runs?status=awaiting_approval")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q] .status.awaiting_approval`, id))))
		if s := f.text(t, tab, fmt.Sprintf(`tr[data-run=%q] [data-fact="deadline"]`, id)); !strings.HasPrefix(s, "denied at ") {
			t.Errorf("the waiting run's deadline in the list: %q", s)
		}
		f.goTo(t, tab, "/runs/"+id)
		if s := f.text(t, tab, `[data-fact="deadline"]`); !strings.Contains(s, "denied at") {
			t.Errorf("the waiting run's deadline on its page: %q", s)
		}
		f.api(t, globexToken, "POST", "/v1/runs/"+id+"/cancel", nil)
	})

	t.Run("the answered list shows every answer, with who answered and when", func(t *testing.T) {
		parked := func(id string) string {
			_, run := f.api(t, globexToken, "GET", "/v1/runs/"+id, nil)
			for _, c := range run["calls"].([]any) {
				if c := c.(map[string]any); c["status"] == "awaiting_approval" {
					return c["id"].(string)
				}
			}
			t.Fatalf("run %s has no call awaiting approval: %v", id, run)
			return ""
		}
		answer := func(call string, body map[string]any) {
			if status, out := f.api(t, globexToken, "POST", "/v1/approvals/"+call, body); status != http.StatusAccepted {
				t.Fatalf("answer %s with %v: %d %v", call, body, status, out)
			}
		}
		approved, modified, denied := parked(f.startDemo(t, globexToken)), parked(f.startDemo(t, globexToken)), parked(f.startDemo(t, globexToken))
		canceledRun := f.startDemo(t, globexToken)
		canceled := parked(canceledRun)
		answer(approved, map[string]any{"decision": "approve"})
		answer(modified, map[string]any{"decision": "approve", "arguments": map[string]any{"path": "other.txt", "content": "changed"}})
		answer(denied, map[string]any{"decision": "deny", "reason": "not today"})
		f.api(t, globexToken, "POST", "/v1/runs/"+canceledRun+"/cancel", nil)

		tab := f.tab(t, globexToken, "/approvals?status=answered")
		for call, want := range map[string]string{approved: "approved", modified: "approved", denied: "denied", canceled: "canceled"} {
			card := fmt.Sprintf(`article[data-call=%q]`, call)
			f.until(t, tab, fmt.Sprintf(`document.querySelector(%q) !== null`, card))
			if s := f.text(t, tab, card); !strings.Contains(s, want) || !strings.Contains(s, " by globex") || !strings.Contains(s, " at ") {
				t.Errorf("the answered list's card of %s: %q, want %s by its answerer and when", call, s, want)
			}
		}
		if s := f.text(t, tab, fmt.Sprintf(`article[data-call=%q]`, modified)); !strings.Contains(s, "other.txt") {
			t.Errorf("the modified approval's card does not show the arguments it ran with: %q", s)
		}
	})

	t.Run("a second tenant never sees the first's runs", func(t *testing.T) {
		f.needLists(t)
		acmeRun := f.startDemo(t, acmeToken)
		globexRun := f.startDemo(t, globexToken)
		// globex signs in on the token page.
		tab := f.tab(t, "", "/runs")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`#token`)),
			chromedp.SendKeys(chromedp.CSS(`#token`), globexToken), chromedp.Click(chromedp.CSS(`form.login button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-run=%q]`, globexRun))))
		var foreign int
		f.run(t, tab, js(fmt.Sprintf(`document.querySelectorAll('tr[data-run=%q]').length`, acmeRun), &foreign))
		if foreign != 0 {
			t.Errorf("globex's runs list shows acme's run %s", acmeRun)
		}
		f.goTo(t, tab, "/runs/"+acmeRun)
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`.error-box`)))
		if s := f.text(t, tab, `.error-box`); !strings.HasPrefix(s, "404") {
			t.Errorf("globex opening acme's run: %q", s)
		}
		f.goTo(t, tab, "/approvals")
		f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`article[data-call]`)))
		var shown int
		f.run(t, tab, js(fmt.Sprintf(`document.querySelectorAll('article[data-call^=%q]').length`, acmeRun+"-"), &shown))
		if shown != 0 {
			t.Errorf("globex's approvals inbox shows acme's call")
		}
		// acme's dead letter (the fleet subtest's) is not globex's.
		f.goTo(t, tab, "/fleet")
		var dead int
		f.until(t, tab, `document.querySelector('#dead-letters').childElementCount > 0`)
		f.run(t, tab, js(`document.querySelectorAll('#dead-letters tr[data-seq]').length`, &dead))
		if dead != 0 {
			t.Errorf("globex's fleet page shows %d dead letters of acme", dead)
		}
	})
}
