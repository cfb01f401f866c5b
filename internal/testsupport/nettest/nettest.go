// Package nettest holds the tests' helpers for TCP ports on 127.0.0.1: ports for
// servers a test starts, a listener that counts who connected, and a proxy that can
// hold a server's answers.
package nettest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago and that FreePort has
// not handed out before in this process: the kernel can give a port it gave a moment
// ago once it is closed again, and a server whose port another was given would not
// start.
func FreePort(tb testing.TB) int {
	tb.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// handedOut holds the ports FreePort gave in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Listen opens a TCP listener on 127.0.0.1 until the test ends, accepting and closing
// every connection. accepted counts them, waiting up to a second for at least want.
func Listen(tb testing.TB) (host, port string, accepted func(want int) int) {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var n atomic.Int32
	accepting := make(chan struct{})
	tb.Cleanup(func() { ln.Close(); <-accepting })
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	host, port, _ = net.SplitHostPort(ln.Addr().String()) // a TCP listener's address always splits
	return host, port, func(want int) int {
		for deadline := time.Now().Add(time.Second); int(n.Load()) < want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		return int(n.Load())
	}
}

// Proxy forwards TCP connections to a server, and can hold what the server sends back
// ([Proxy.Hold], [Proxy.Release]): a server that stops answering for a while, as one
// that falls behind seems to its clients. It is closed, and its goroutines have
// returned, when the test ends.
type Proxy struct {
	tb     testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	changed *sync.Cond // held or conns changed
	held    bool
	closed  bool
	conns   []net.Conn
	watches []watch
}

// watch is a string a client is expected to send, and what is closed once it has.
type watch struct {
	s    string
	sent chan struct{}
}

// NewProxy forwards connections made to its address ([Proxy.Addr]) to target
// (host:port) until the test ends.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{tb: tb, target: target, ln: ln}
	p.changed = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hold stops forwarding what the server sends until Release: the clients' requests
// reach the server, its answers wait.
func (p *Proxy) Hold() { p.setHeld(true) }

// Release forwards what the server sent meanwhile, and everything after.
func (p *Proxy) Release() { p.setHeld(false) }

func (p *Proxy) setHeld(h bool) {
	p.mu.Lock()
	p.held = h
	p.mu.Unlock()
	p.changed.Broadcast()
}

// Sent returns a channel closed once a client has sent s (within one read of the
// proxy, or across two) through the proxy from now on.
func (p *Proxy) Sent(s string) <-chan struct{} {
	w := watch{s: s, sent: make(chan struct{})}
	p.mu.Lock()
	p.watches = append(p.watches, w)
	p.mu.Unlock()
	return w.sent
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.toServer(c, s) })
		p.wg.Go(func() { p.toClient(s, c) })
	}
}

// toServer copies what client sends to server, closing the watches it satisfies.
func (p *Proxy) toServer(client, server net.Conn) {
	defer server.Close()
	buf := make([]byte, 32<<10)
	var tail []byte // the end of the previous read, for a string split across two
	for {
		n, err := client.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			p.mu.Lock()
			kept := p.watches[:0]
			for _, w := range p.watches {
				if strings.Contains(string(seen), w.s) {
					close(w.sent)
				} else {
					kept = append(kept, w)
				}
			}
			p.watches = kept
			p.mu.Unlock()
			tail = append([]byte(nil), seen[max(0, len(seen)-256):]...)
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// toClient copies what server sends to client, waiting while the proxy holds it.
func (p *Proxy) toClient(server, client net.Conn) {
	defer client.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.held && !p.closed {
				p.changed.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.changed.Broadcast()
	p.wg.Wait()
}
