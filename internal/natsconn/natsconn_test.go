package natsconn

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
)

func TestRegisterReadsEnvironment(t *testing.T) {
	t.Setenv("TOOLFLEET_NATS_URL", "nats://example:4222")
	t.Setenv("TOOLFLEET_NATS_PASSWORD", "s3cret")
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs)
	if err := fs.Parse([]string{"-nats-user", "exec"}); err != nil {
		t.Fatal(err)
	}
	if c.URL != "nats://example:4222" || c.User != "exec" || c.Password != "s3cret" {
		t.Fatalf("config = %+v", c)
	}
}

func TestValidateRefusesBadCombinations(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "x.creds")
	if err := os.WriteFile(creds, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "no server URL"},
		{"cert without key", Config{URL: "nats://x", TLSCert: creds}, "both a TLS certificate and its key"},
		{"creds and user", Config{URL: "nats://x", CredsFile: creds, User: "u"}, "either a credentials file"},
		{"missing creds file", Config{URL: "nats://x", CredsFile: filepath.Join(dir, "nope")}, "credentials file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConnect(t *testing.T) {
	s := natstest.Start(t)
	nc, err := Config{URL: s.URL(), Name: "test"}.Connect(zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Fatal("not connected")
	}
}

// A part started before its server waits for it: Connect returns, and the connection
// comes up once the server does.
func TestConnectWaitsForAServerThatIsDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	nc, err := Config{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}.Connect(zerolog.Nop(), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("Connect with the server down: %v (want a connection that waits)", err)
	}
	defer nc.Close()
	if nc.IsConnected() {
		t.Fatal("connected to a server that is not running")
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	natstest.EventuallyNil(t, 30*time.Second, "the connection to the server started late", func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("status %v", nc.Status())
		}
		return nil
	})
}

// An asynchronous error (here a refused publish) reaches the JSON log, not stderr as
// plain text.
func TestAsyncErrorsAreLoggedAsJSON(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{"allowed"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	var buf opstest.Log
	nc, err := Config{URL: srv.ClientURL(), User: "u", Password: "p"}.Connect(zerolog.New(&buf))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish("forbidden", []byte("x")); err != nil {
		t.Fatal(err)
	}
	natstest.EventuallyNil(t, 30*time.Second, "the permissions error in the log", func() error {
		if !strings.Contains(buf.String(), "Permissions Violation") {
			return fmt.Errorf("the log is %q", buf.String())
		}
		return nil
	})
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %q", line)
		}
	}
}
