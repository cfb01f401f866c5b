package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// The built executor, started before its NATS server exists, waits for it and comes up
// with it; then a call published on the literal subject toolfleet.call.* and one with a
// URN for an id (both allowed to any client) are each answered once, at the ids their
// publisher gave.
func TestExecutorBinaryHostileStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the executor binary")
	}
	bin := buildExecutor(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opsAddr := opstest.FreeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("TOOLFLEET_NATS_URL=nats://127.0.0.1:%d", port), "TOOLFLEET_OPS_ADDR="+opsAddr,
		"TOOLFLEET_EXECUTOR_ID=early", "TOOLFLEET_BUILTINS=echo", "TOOLFLEET_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	select {
	case err := <-done:
		t.Fatalf("the executor exited while its server was down: %v", err)
	case <-time.After(time.Second):
	}

	srv := natstest.StartOnPort(t, port)
	opstest.WaitReady(t, opsAddr)
	nc := srv.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	res := collectResults(t, nc)
	urn := "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66"
	publishCall(t, js, "echo", urn, `{"value":"hi"}`)
	publishCall(t, js, "*", "wild", `{"value":"hi"}`)
	natstest.Eventually(t, waitTimeout, "both answers", func() bool { return res.count() == 2 })
	time.Sleep(500 * time.Millisecond)
	res.mu.Lock()
	defer res.mu.Unlock()
	if got := res.byID[urn]; len(got) != 1 || got[0].Status != events.StatusOK || string(got[0].Output) != `{"value":"hi"}` {
		t.Errorf("URN call: %+v", got)
	}
	if got := res.byID["wild"]; len(got) != 1 || got[0].Status != events.StatusInvalid || got[0].Error.Code != "invalid_event" {
		t.Errorf("call on toolfleet.call.*: %+v", got)
	}
}
