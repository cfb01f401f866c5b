package ops

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

// /readyz says "starting" until the program sets its checks, then follows them; /healthz
// and /metrics answer all along.
func TestServer(t *testing.T) {
	t.Parallel()
	srv, err := Start("127.0.0.1:0", NewRegistry(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	opstest.Serves(t, srv.Addr())
	if code, body := opstest.Get(t, srv.Addr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Errorf("/readyz before SetReady: %d %q", code, body)
	}
	nats := natstest.Start(t)
	nc := nats.Connect()
	var indexed atomic.Bool
	srv.SetReady(Connected(nc), func() error {
		if !indexed.Load() {
			return errors.New("catalog not indexed")
		}
		return nil
	})
	if code, body := opstest.Get(t, srv.Addr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "catalog not indexed") {
		t.Errorf("/readyz with a failing check: %d %q", code, body)
	}
	indexed.Store(true)
	if code, body := opstest.Get(t, srv.Addr(), "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	nc.Close()
	if code, body := opstest.Get(t, srv.Addr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not connected to NATS") {
		t.Errorf("/readyz once disconnected: %d %q", code, body)
	}
}

func TestServerOffAndTakenPort(t *testing.T) {
	t.Parallel()
	off, err := Start("", NewRegistry(), zerolog.Nop())
	if err != nil || off.Addr() != "" {
		t.Fatalf("off: %q %v", off.Addr(), err)
	}
	off.SetReady()
	off.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Start(ln.Addr().String(), NewRegistry(), zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "ops server: listen "+ln.Addr().String()) {
		t.Errorf("a taken port: %v", err)
	}
}

// health exits 0 against a ready server, 1 with the reason against one that is not
// ready, a dead port, or an ops server turned off.
func TestHealth(t *testing.T) {
	srv, err := Start("127.0.0.1:0", NewRegistry(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Addr())
	dead := deadPort(t)
	tests := []struct {
		name  string
		setup func()
		env   map[string]string
		args  []string
		code  int
		says  string
	}{
		{"starting", nil, map[string]string{AddrEnv: ":" + port}, nil, 1, "503 Service Unavailable: not ready: starting"},
		{"ready, by variable", func() { srv.SetReady() }, map[string]string{AddrEnv: "0.0.0.0:" + port}, nil, 0, ""},
		{"ready, by flag", nil, nil, []string{"-ops-addr", ":" + port}, 0, ""},
		{"ready, by the executor's old variable", nil, map[string]string{"TOOLFLEET_METRICS_ADDR": ":" + port}, nil, 0, ""},
		{"ready, by the picker's old variable", nil, map[string]string{"TOOLFLEET_PICKER_HTTP": ":" + port}, nil, 0, ""},
		{"ready, whatever the log level", nil, map[string]string{AddrEnv: ":" + port, LevelEnv: "loud"}, nil, 0, ""},
		{"dead port", nil, map[string]string{AddrEnv: ":" + dead}, nil, 1, "connection refused"},
		{"any interface is asked on loopback", nil, map[string]string{AddrEnv: "[::]:" + dead}, nil, 1, "http://127.0.0.1:" + dead + "/readyz"},
		{"off", nil, map[string]string{AddrEnv: "off"}, nil, 1, "the ops server is off"},
		{"bad address: a configuration error", nil, map[string]string{AddrEnv: "nope"}, nil, 2, `TOOLFLEET_OPS_ADDR "nope"`},
		{"bad flag", nil, nil, []string{"-nope"}, 2, "flag provided but not defined"},
		{"help", nil, nil, []string{"-h"}, 0, "-ops-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.setup != nil {
				tt.setup()
			}
			var stderr bytes.Buffer
			code := Health(tt.args, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.says) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.says)
			}
		})
	}
}

// deadPort returns a loopback port nothing listens on.
func deadPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

func TestProbeAddresses(t *testing.T) {
	t.Parallel()
	if err := Probe(context.Background(), "no-port"); err == nil || !strings.Contains(err.Error(), `ops address "no-port"`) {
		t.Errorf("Probe without a port: %v", err)
	}
}
