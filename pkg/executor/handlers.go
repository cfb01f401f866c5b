package executor

import (
	"sync"
	"time"
)

// Each call is handled on a goroutine of its own. Started afresh per call, that
// goroutine cost a twentieth of the executor's CPU under load: creating it, and growing
// its stack from the smallest size to what handling a call needs (decode, look-up, run,
// encode, publish). So a goroutine that finished a call waits a while for the next one
// and handles it on the stack it already has; under load the same few hundred
// goroutines handle every call, and an idle executor keeps none (each leaves after
// handlerIdle without work).

// handlerIdle is how long a handler goroutine waits for another call before it ends.
const handlerIdle = time.Second

// handlers runs functions on reused goroutines.
type handlers struct {
	next chan func() // unbuffered: a send succeeds only if a goroutine is waiting
	quit chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func newHandlers() *handlers {
	return &handlers{next: make(chan func()), quit: make(chan struct{})}
}

// run runs f on a waiting goroutine, or on a new one when none waits.
func (h *handlers) run(f func()) {
	select {
	case h.next <- f:
	default:
		h.wg.Add(1)
		go h.loop(f)
	}
}

func (h *handlers) loop(f func()) {
	defer h.wg.Done()
	idle := time.NewTimer(handlerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(handlerIdle)
		select {
		case f = <-h.next:
		case <-idle.C:
			return
		case <-h.quit:
			return
		}
	}
}

// stop ends the waiting goroutines and waits for every goroutine to end; the functions
// still running are the caller's to end first.
func (h *handlers) stop() {
	h.once.Do(func() { close(h.quit) })
	h.wg.Wait()
}
