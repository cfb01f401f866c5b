package jsutil_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// A write with an expected subject sequence refused because its subject holds a message
// (10071) is decided: answered already. One refused while a replicated stream is still
// storing another write of the subject (10164) or of the message id (10158) is not
// decided yet. Both as a publish returns them and as the key-value API wraps them.
func TestWriteRefusals(t *testing.T) {
	answered := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 7"}
	inProgress := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
	for _, c := range []struct {
		name                  string
		err                   error
		isAnswered, isWriting bool
	}{
		{"stored already", fmt.Errorf("publish: %w", answered), true, false},
		{"stored already (key-value)", fmt.Errorf("%w: key exists", answered), true, false},
		{"another write in progress", fmt.Errorf("publish: %w", inProgress), false, true},
		{"another write in progress (key-value)", fmt.Errorf("%w: %w", inProgress, jetstream.ErrKeyExists), false, true},
		{"the same message id in progress", fmt.Errorf("publish: %w", &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"}), false, true},
		{"other refusal", &jetstream.APIError{Code: 400, ErrorCode: 10054}, false, false},
		{"no answer", jetstream.ErrAsyncPublishTimeout, false, false},
	} {
		if got := jsutil.IsAlreadyAnswered(c.err); got != c.isAnswered {
			t.Errorf("%s: IsAlreadyAnswered %v, want %v", c.name, got, c.isAnswered)
		}
		if got := jsutil.IsWriteInProgress(c.err); got != c.isWriting {
			t.Errorf("%s: IsWriteInProgress %v, want %v", c.name, got, c.isWriting)
		}
	}
}

// LeaderGetLast reads what a direct get reads, from the stream's leader: the last
// message on a subject with its headers and sequence, nothing for a subject without one,
// and an error for a stream that does not exist.
func TestLeaderGetLast(t *testing.T) {
	f := natstest.StartJetStream(t, events.Config{})
	ctx := context.Background()
	for _, out := range []string{`"first"`, `"second"`} {
		m, err := events.NewResult("/test", events.Result{Tool: "echo", CallID: "call-" + out[1:2], RunID: "run-1", Status: events.StatusOK, Output: json.RawMessage(out)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		m.Subject = "toolfleet.result.run-1.call-1" // both on one subject: the last one counts
		delete(m.Header, events.HeaderExpectedLastSubjectSeq)
		if _, err := f.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	stream := f.Cfg.ResultStreams()[0]
	direct, err := jsutil.DirectGetLast(ctx, f.NC, stream, "toolfleet.result.run-1.call-1")
	if err != nil || direct == nil {
		t.Fatalf("direct get: %v, %v", direct, err)
	}
	got, err := jsutil.LeaderGetLast(ctx, f.NC, stream, "toolfleet.result.run-1.call-1")
	if err != nil || got == nil {
		t.Fatalf("leader get: %v, %v", got, err)
	}
	if string(got.Data) != string(direct.Data) || got.Header.Get(events.HeaderID) != "call-s" ||
		got.Header.Get(events.HeaderID) != direct.Header.Get(events.HeaderID) || got.Subject != "toolfleet.result.run-1.call-1" {
		t.Fatalf("leader get read %s %q %v, direct get %q %v", got.Subject, got.Data, got.Header, direct.Data, direct.Header)
	}
	if seq := direct.Header.Get("Nats-Sequence"); seq != strconv.FormatUint(got.Sequence, 10) {
		t.Fatalf("leader get sequence %d, direct get %s", got.Sequence, seq)
	}
	if none, err := jsutil.LeaderGetLast(ctx, f.NC, stream, "toolfleet.result.run-1.call-9"); none != nil || err != nil {
		t.Fatalf("a subject without messages: %v, %v", none, err)
	}
	if _, err := jsutil.LeaderGetLast(ctx, f.NC, "NO_SUCH_STREAM", "x"); err == nil {
		t.Fatal("a stream that does not exist: no error")
	}
}

// DirectGetWritten asks again before it believes a miss: a message stored while it asks
// is found, and a subject that stays empty is reported empty, not an error.
func TestDirectGetWritten(t *testing.T) {
	f := natstest.StartJetStream(t, events.Config{})
	ctx := context.Background()
	stream := f.Cfg.ResultStreams()[0]
	m, err := events.NewResult("/test", events.Result{Tool: "echo", CallID: "call-1", RunID: "run-1", Status: events.StatusOK, Output: json.RawMessage(`1`)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(15 * time.Millisecond) // after the first look
		if _, err := f.JS.PublishMsg(ctx, m); err != nil {
			t.Error(err)
		}
	}()
	got, err := jsutil.DirectGetWritten(ctx, f.NC, stream, m.Subject)
	if err != nil || got == nil || got.Header.Get(events.HeaderID) != "call-1" {
		t.Fatalf("a message stored while asking: %v, %v", got, err)
	}
	none, err := jsutil.DirectGetWritten(ctx, f.NC, stream, "toolfleet.result.run-1.call-2")
	if none != nil || err != nil {
		t.Fatalf("an empty subject: %v, %v", none, err)
	}
}

// Which failed writes are tried again: what may pass (no answer, no responders, a
// stream busy or electing, a conflicting write still being stored on a cluster) and not
// what the server refused for good (the subject holds a message, too large).
func TestMayPass(t *testing.T) {
	api := func(code int, errCode jetstream.ErrorCode) error {
		return fmt.Errorf("publish: %w", &jetstream.APIError{Code: code, ErrorCode: errCode, Description: "x"})
	}
	for _, c := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"no PubAck in time", fmt.Errorf("publish: %w", jetstream.ErrAsyncPublishTimeout), true},
		{"no answer before the try's deadline", fmt.Errorf("create: %w", context.DeadlineExceeded), true},
		{"no responders", fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), true},
		{"another write of the subject in progress (clustered)", api(400, jetstream.JSErrCodeStreamWrongLastSequenceConstant), true},
		{"duplicate in process", api(409, 10158), true},
		{"too many requests", api(429, 0), true},
		{"stream temporarily unavailable", api(503, 10008), true},
		{"the subject holds a message", api(400, jetstream.JSErrCodeStreamWrongLastSequence), false},
		{"message too large for the stream", api(400, 10054), false},
		{"message too large for the server", fmt.Errorf("publish: %w", nats.ErrMaxPayload), false},
		{"connection closed", fmt.Errorf("publish: %w", nats.ErrConnectionClosed), false},
	} {
		if got := jsutil.MayPass(c.err); got != c.retry {
			t.Errorf("%s (%v): may pass %v, want %v", c.name, c.err, got, c.retry)
		}
	}
}

// RetryWrite tries a write again while its failure may pass, each try on a clock of its
// own (a try whose answer never comes ends, and the next starts), and stops at the first
// success, at a refusal, or when its context ends.
func TestRetryWrite(t *testing.T) {
	refused := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 3"}
	t.Run("an unanswered try, then stored", func(t *testing.T) {
		tries := 0
		err := jsutil.RetryWrite(context.Background(), 50*time.Millisecond, func(ctx context.Context) error {
			tries++
			if tries == 1 {
				<-ctx.Done() // the server died with the request
				return ctx.Err()
			}
			return nil
		})
		if err != nil || tries != 2 {
			t.Fatalf("%d tries, %v", tries, err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		tries := 0
		err := jsutil.RetryWrite(context.Background(), time.Second, func(context.Context) error {
			tries++
			return fmt.Errorf("create: %w", refused)
		})
		if !jsutil.IsAlreadyAnswered(err) || tries != 1 {
			t.Fatalf("%d tries, %v", tries, err)
		}
	})
	t.Run("the caller's time is up", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		tries := 0
		start := time.Now()
		err := jsutil.RetryWrite(ctx, time.Second, func(context.Context) error {
			tries++
			return fmt.Errorf("publish: %w", nats.ErrNoResponders)
		})
		if !errors.Is(err, nats.ErrNoResponders) || tries < 2 || time.Since(start) > 2*time.Second {
			t.Fatalf("%d tries in %s, %v", tries, time.Since(start), err)
		}
	})
}
