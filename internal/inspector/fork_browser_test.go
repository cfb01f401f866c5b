package inspector_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// approveWaiting approves, as token's holder, the call of run id that waits for an
// approval, with arguments when not nil, and waits for the run's end.
func (f *fleet) approveWaiting(t *testing.T, token, id string, arguments map[string]any) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	answered := false
	for time.Now().Before(deadline) {
		_, run := f.api(t, token, "GET", "/v1/runs/"+id, nil)
		if run["status"] == "done" {
			return
		}
		calls, _ := run["calls"].([]any)
		for _, c := range calls {
			if call, _ := c.(map[string]any); !answered && call["status"] == "awaiting_approval" {
				body := map[string]any{"decision": "approve"}
				if arguments != nil {
					body["arguments"] = arguments
				}
				if status, out := f.api(t, token, "POST", "/v1/approvals/"+call["id"].(string), body); status != http.StatusAccepted {
					t.Fatalf("approve %s: %d %v", call["id"], status, out)
				}
				answered = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", id)
}

// Rerun the demo run from its write_file step in the page: the form says what is
// reused and what runs again, the fork's page links its origin (and the origin's its
// fork); the fork's write_file approved with another path, the two runs picked in the
// runs list open the compare view, which highlights the changed argument.
func TestInspectorForkAndCompare(t *testing.T) {
	f := startFleet(t)
	f.needLists(t)
	id := f.startDemo(t, acmeToken)
	f.approveWaiting(t, acmeToken, id, nil)

	tab := f.tab(t, acmeToken, "/runs/"+id)
	f.run(t, tab, chromedp.Click(chromedp.CSS(`section[aria-label="forks"] summary`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-rerun-step="3"]`)),
		chromedp.Click(chromedp.CSS(`[data-rerun-step="3"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.fork-form[data-step="3"] .fork-msgs li`)))
	if s := f.text(t, tab, `form.fork-form .fork-reuse`); !strings.Contains(s, "steps 0–2, 4 calls") || !strings.Contains(s, "Runs again: step 3") {
		t.Errorf("what the rerun reuses: %q", s)
	}
	f.run(t, tab, chromedp.SetValue(chromedp.CSS(`#fork-input`), "Write it once more."),
		chromedp.Click(chromedp.CSS(`[data-action="fork"]`)))
	f.until(t, tab, fmt.Sprintf(`location.hash.startsWith('#/runs/') && location.hash !== %q`, "#/runs/"+id))
	var hash string
	f.run(t, tab, js(`location.hash`, &hash))
	fork := strings.TrimPrefix(hash, "#/runs/")
	f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(`section[aria-label="forks"] .fork-origin a`)))
	if s := f.text(t, tab, `section[aria-label="forks"] .fork-origin`); !strings.Contains(s, id) || !strings.Contains(s, "at step 3") {
		t.Errorf("the fork's origin: %q", s)
	}
	f.approveWaiting(t, acmeToken, fork, map[string]any{"path": "report-2.txt", "content": "orders total: 84\n"})

	// The origin lists its fork.
	f.goTo(t, tab, "/runs/"+id)
	f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`section[aria-label="forks"] li[data-fork=%q]`, fork))))

	// Pick both in the runs list, compare.
	f.goTo(t, tab, "/runs")
	f.run(t, tab, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`input[data-compare=%q]`, fork))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[data-compare=%q]`, id))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[data-compare=%q]`, fork))),
		chromedp.Click(chromedp.CSS(`#compare-selected`)),
		chromedp.WaitVisible(chromedp.CSS(`.diff-view`)))
	if s := f.text(t, tab, `.diff-view .card`); !strings.Contains(s, "3 steps shared") {
		t.Errorf("the compare view's summary: %q", s)
	}
	if s := f.text(t, tab, `.diff-call[data-tool="write_file"] .diff-args`); !strings.Contains(s, "/path replace") || !strings.Contains(s, "report-2.txt") {
		t.Errorf("the changed argument: %q", s)
	}
	var marked string
	f.run(t, tab, js(`document.querySelector('.diff-call[data-tool="write_file"] .diff-args mark').textContent`, &marked))
	if marked != "/path" {
		t.Errorf("the highlighted argument is %q, want /path", marked)
	}
	var rows int
	f.run(t, tab, js(`document.querySelectorAll('tr.changed[data-steps="3/0"]').length`, &rows))
	if rows != 1 {
		t.Errorf("the write_file step is not marked changed (%d rows)", rows)
	}
}
