package toolsfile

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

type recorder struct {
	mu  sync.Mutex
	got []tools.Progress
}

func (r *recorder) ReportProgress(p tools.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, p)
}

// Lines "::progress {json}" on a command's stderr are reported as progress and left out
// of its stderr; every other line, a malformed progress line included, stays.
func TestCommandProgressLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := script(t, dir, "progress", `echo "warming up" >&2
echo '::progress {"message":"page 1","fraction":0.5,"data":{"page":1}}' >&2
printf '::progress {"message":"page 2",' >&2; printf '"fraction":2}\n' >&2
echo '::progress not json' >&2
echo "disk full" >&2
exit 3`)
	rec := &recorder{}
	ctx := tools.WithProgress(context.Background(), rec)
	_, err := commandSpec("t", &Command{Argv: []string{p}}).Run(ctx, json.RawMessage(`{}`))
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Stderr != "warming up\n::progress not json\ndisk full" {
		t.Fatalf("stderr %q (err %v), want the ordinary lines only", ee, err)
	}
	if len(rec.got) != 2 || rec.got[0].Message != "page 1" || rec.got[0].Fraction != 0.5 || string(rec.got[0].Data) != `{"page":1}` ||
		rec.got[1].Message != "page 2" || rec.got[1].Fraction != 1 {
		t.Fatalf("progress %+v", rec.got)
	}
	// Outside an executor progress lines are dropped without harm.
	if _, err := commandSpec("t", &Command{Argv: []string{p}}).Run(context.Background(), json.RawMessage(`{}`)); !errors.As(err, &ee) {
		t.Fatalf("without a reporter: %v", err)
	}
}
