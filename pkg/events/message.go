package events

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Message is what the decoders read: a subject, headers and a body. A [jetstream.Msg], as
// a consumer delivers it, is one; a core *nats.Msg (a subscription's message, what
// [Encode] returns) becomes one through [CoreMsg], and a message read from a stream by
// sequence through [StoredMsg].
type Message interface {
	Subject() string
	Headers() nats.Header
	Data() []byte
}

// CoreMsg returns m as a [Message].
func CoreMsg(m *nats.Msg) Message { return coreMsg{m} }

// StoredMsg returns a message read from a stream (GetMsg, GetLastMsgForSubject) as a
// [Message].
func StoredMsg(m *jetstream.RawStreamMsg) Message { return storedMsg{m} }

type coreMsg struct{ m *nats.Msg }

func (c coreMsg) Subject() string      { return c.m.Subject }
func (c coreMsg) Headers() nats.Header { return c.m.Header }
func (c coreMsg) Data() []byte         { return c.m.Data }

type storedMsg struct{ m *jetstream.RawStreamMsg }

func (s storedMsg) Subject() string      { return s.m.Subject }
func (s storedMsg) Headers() nats.Header { return s.m.Header }
func (s storedMsg) Data() []byte         { return s.m.Data }
