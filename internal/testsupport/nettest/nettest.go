// Package nettest holds the tests' helpers for TCP ports on 127.0.0.1: ports for
// servers a test starts, and a listener that counts who connected.
package nettest

import (
	"net"
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
	tb.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	host, port, _ = net.SplitHostPort(ln.Addr().String())
	return host, port, func(want int) int {
		for deadline := time.Now().Add(time.Second); int(n.Load()) < want && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		return int(n.Load())
	}
}
