package sandbox_test

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// arrivals listens on network (udp, tcp or unix) until the test ends and hands out
// the first byte of each datagram or connection that arrives, in order.
func arrivals(t *testing.T, network string) (addr string, got <-chan string) {
	t.Helper()
	ch := make(chan string, 16)
	switch network {
	case "udp":
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 16)
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				ch <- string(buf[:n])
			}
		}()
		return pc.LocalAddr().String(), ch
	case "unix":
		addr = filepath.Join(t.TempDir(), "s.sock")
	default:
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1)
			n, _ := c.Read(buf)
			c.Close()
			ch <- string(buf[:n])
		}
	}()
	return ln.Addr().String(), ch
}

// nothingArrived sends a marker unconfined to addr and checks that it is the first
// thing got receives: what a sandboxed program sent before never arrived.
func nothingArrived(t *testing.T, network, addr string, got <-chan string) {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("m")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case first := <-got:
		if first != "m" {
			t.Errorf("%s %s received %q from the sandboxed program before the marker", network, addr, first)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s %s: the unconfined marker never arrived", network, addr)
	}
}

// Read-only means no network at all: UDP, a unix socket, TCP, netlink all fail inside
// the program with a clear error, and nothing reaches the listeners. A stream
// socketpair (it reaches nothing but itself) still works.
func TestReadOnlyDeniesEverySocket(t *testing.T) {
	needLandlock(t)
	udp, udpGot := arrivals(t, "udp")
	sock, unixGot := arrivals(t, "unix")
	tcp, tcpGot := arrivals(t, "tcp")
	got := runProbe(t, sandbox.ReadOnly(), t.TempDir(), "udp:"+udp, "unix:"+sock, "tcp:"+tcp,
		"socket:16:3:0", "socketpair:1", "socketpair:2")
	for _, a := range []string{"udp:" + udp, "unix:" + sock, "tcp:" + tcp, "socket:16:3:0", "socketpair:2"} {
		if !strings.Contains(got[a], "permission denied") {
			t.Errorf("%s under read-only: %q, want permission denied", a, got[a])
		}
	}
	if got["socketpair:1"] != "ok" {
		t.Errorf("a stream socketpair under read-only: %q, want ok", got["socketpair:1"])
	}
	nothingArrived(t, "udp", udp, udpGot)
	nothingArrived(t, "unix", sock, unixGot)
	nothingArrived(t, "tcp", tcp, tcpGot)
}

// network: true grants TCP and UDP, and nothing else: unix, netlink, packet and raw
// sockets are denied.
func TestNetworkGrantsTCPAndUDPOnly(t *testing.T) {
	needLandlock(t)
	udp, udpGot := arrivals(t, "udp")
	sock, unixGot := arrivals(t, "unix")
	tcp, tcpGot := arrivals(t, "tcp")
	raw, packet, netlink := "socket:2:3:1", "socket:17:3:0", "socket:16:3:0"
	got := runProbe(t, sandbox.Policy{Network: true}, t.TempDir(), "udp:"+udp, "tcp:"+tcp, "unix:"+sock, raw, packet, netlink)
	for _, a := range []string{"udp:" + udp, "tcp:" + tcp} {
		if got[a] != "ok" {
			t.Errorf("%s with network: %q, want ok", a, got[a])
		}
	}
	for _, a := range []string{"unix:" + sock, raw, packet, netlink} {
		if !strings.Contains(got[a], "permission denied") {
			t.Errorf("%s with network: %q, want permission denied", a, got[a])
		}
	}
	for _, w := range []struct {
		network string
		got     <-chan string
	}{{"udp", udpGot}, {"tcp", tcpGot}} {
		select {
		case first := <-w.got:
			if first != "x" {
				t.Errorf("%s: received %q, want the program's x", w.network, first)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the program's byte never arrived", w.network)
		}
	}
	nothingArrived(t, "unix", sock, unixGot)
}

// SystemPaths hands out a copy: an importer cannot widen what every sandbox reads.
func TestSystemPathsIsACopy(t *testing.T) {
	paths := sandbox.SystemPaths()
	want := strings.Join(paths, " ")
	paths[0] = "/"
	if again := strings.Join(sandbox.SystemPaths(), " "); again != want {
		t.Fatalf("SystemPaths after changing a copy: %s, want %s", again, want)
	}
}
