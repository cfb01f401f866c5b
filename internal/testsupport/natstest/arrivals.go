package natstest

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Arrivals tells, by key, when a message whose subject has that key arrived on a core
// subscription: a benchmark waiting for a call's result or a run's done event, without
// a consumer of its own. Asking before or after the arrival both work.
type Arrivals struct {
	mu sync.Mutex
	ch map[string]chan struct{} // open: asked for; closed: arrived, not asked for yet
}

// Listen subscribes to subject until the test ends; key names each message by its
// subject (a call id, a run id).
func Listen(tb testing.TB, nc *nats.Conn, subject string, key func(subject string) string) *Arrivals {
	tb.Helper()
	a := &Arrivals{ch: map[string]chan struct{}{}}
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		k := key(m.Subject)
		a.mu.Lock()
		defer a.mu.Unlock()
		ch, asked := a.ch[k]
		if !asked {
			ch = make(chan struct{})
			a.ch[k] = ch
		} else {
			delete(a.ch, k) // both sides are done with it
		}
		select {
		case <-ch: // a repeated message
		default:
			close(ch)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sub.Unsubscribe() })
	return a
}

// Of returns a channel closed once a message with key has arrived.
func (a *Arrivals) Of(key string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.ch[key]
	if !ok {
		ch = make(chan struct{})
		a.ch[key] = ch
		return ch
	}
	select {
	case <-ch: // arrived before it was asked for
		delete(a.ch, key)
	default:
	}
	return ch
}

// Await waits for ch (an [Arrivals.Of] taken before the clock started) and fails tb with
// what when nothing arrives within 30 seconds.
func Await(tb testing.TB, ch <-chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		tb.Fatal(what)
	}
}
