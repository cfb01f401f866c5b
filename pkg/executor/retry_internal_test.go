package executor

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Which failed result publishes are tried again: what may pass (no answer, no
// responders, a stream busy or electing, another result of the call still being stored
// on a cluster) and not what the server refused for good (the call answered, too large).
func TestRetryPublish(t *testing.T) {
	api := func(code int, errCode jetstream.ErrorCode) error {
		return fmt.Errorf("publish: %w", &jetstream.APIError{Code: code, ErrorCode: errCode, Description: "x"})
	}
	for _, c := range []struct {
		name  string
		err   error
		retry bool
	}{
		{"no PubAck in time", fmt.Errorf("publish: %w", jetstream.ErrAsyncPublishTimeout), true},
		{"no responders", fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), true},
		{"another result in process (clustered)", api(400, jetstream.JSErrCodeStreamWrongLastSequenceConstant), true},
		{"duplicate in process", api(409, 10111), true},
		{"too many requests", api(429, 0), true},
		{"stream temporarily unavailable", api(503, 10008), true},
		{"answered already", api(400, jetstream.JSErrCodeStreamWrongLastSequence), false},
		{"message too large for the stream", api(400, 10054), false},
		{"message too large for the server", fmt.Errorf("publish: %w", nats.ErrMaxPayload), false},
		{"connection closed", fmt.Errorf("publish: %w", nats.ErrConnectionClosed), false},
	} {
		if got := retryPublish(c.err); got != c.retry {
			t.Errorf("%s (%v): retry %v, want %v", c.name, c.err, got, c.retry)
		}
	}
}
