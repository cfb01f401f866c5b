package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func TestSleepWaitsTheDuration(t *testing.T) {
	t.Parallel()
	start := time.Now()
	out, err := (&Sleep{Duration: "20ms"}).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out.(SleepResult).Slept != "20ms" {
		t.Fatalf("Run = %+v, want slept 20ms", out)
	}
	if elapsed := time.Since(start); elapsed < 20*time.Millisecond {
		t.Fatalf("Run returned after %s, before the 20ms were up", elapsed)
	}
}

func TestSleepHonoursTheContext(t *testing.T) {
	t.Parallel()
	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := (&Sleep{Duration: "1m"}).Run(ctx)
		if !errors.Is(err, tools.ErrTimeout) {
			t.Fatalf("Run error = %v, want timeout", err)
		}
		// Generous bound: the point is that it did not sleep the minute.
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Fatalf("Run returned after %s; it ignored the deadline", elapsed)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := (&Sleep{Duration: "1m"}).Run(ctx)
		if !errors.Is(err, tools.ErrCanceled) {
			t.Fatalf("Run error = %v, want canceled", err)
		}
	})
}

func TestSleepRefusesBadDurations(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		s    Sleep
	}{
		{"not a duration", Sleep{Duration: "soon"}},
		{"negative", Sleep{Duration: "-1s"}},
		{"over the default limit", Sleep{Duration: "2m"}},
		{"over a configured limit", Sleep{Duration: "2s", max: time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tt.s.Run(context.Background())
			var te *tools.Error
			if !errors.As(err, &te) || te.Code != tools.CodeInvalidInput || te.Violations[0].Pointer != "/duration" {
				t.Fatalf("Run error = %v, want invalid_tool_input at /duration", err)
			}
		})
	}
}

func TestEchoReturnsItsInput(t *testing.T) {
	t.Parallel()
	for _, v := range []string{`"hello"`, `42`, `null`, `{"nested":[1,2,{"a":"b"}]}`} {
		out, err := (&Echo{Value: json.RawMessage(v)}).Run(context.Background())
		if err != nil {
			t.Fatalf("Run(%s): %v", v, err)
		}
		b, _ := json.Marshal(out)
		if want := `{"value":` + v + `}`; string(b) != want {
			t.Fatalf("Run(%s) = %s, want %s", v, b, want)
		}
	}
	if _, err := (&Echo{}).Run(context.Background()); !errors.Is(err, tools.ErrInvalidInput) {
		t.Fatalf("Run without a value: %v, want invalid_tool_input", err)
	}
}
