package events_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// A write with an expected subject sequence refused because its subject holds a message
// (10071) is decided: answered already. One refused while another write of the subject
// is still being stored by a replicated stream (10164) is not decided yet. Both as a
// publish returns them and as the key-value API wraps them.
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
		{"other refusal", &jetstream.APIError{Code: 400, ErrorCode: 10054}, false, false},
		{"no answer", jetstream.ErrAsyncPublishTimeout, false, false},
	} {
		if got := events.IsAlreadyAnswered(c.err); got != c.isAnswered {
			t.Errorf("%s: IsAlreadyAnswered %v, want %v", c.name, got, c.isAnswered)
		}
		if got := events.IsWriteInProgress(c.err); got != c.isWriting {
			t.Errorf("%s: IsWriteInProgress %v, want %v", c.name, got, c.isWriting)
		}
	}
}
