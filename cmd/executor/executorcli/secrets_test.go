package executorcli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/opstest"
	"github.com/toolfleet/toolfleet/pkg/executor"
)

// The executor program does not start when a tool of its tools file declares a secret
// that is not there; the error names the tool, the secret and where it was looked for.
func TestRunRefusesAMissingSecret(t *testing.T) {
	opstest.Env(t, nil)
	srv := natstest.Start(t)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	err := os.WriteFile(file, []byte(`
tools:
  - name: weather
    parameters: {type: object}
    secrets: [{name: WEATHER_TOKEN}]
    http:
      url: http://127.0.0.1:1/now
      headers: {Authorization: "Bearer ${secret:WEATHER_TOKEN}"}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"-nats-url", srv.URL(), "-ops-addr", "off", "-tools-file", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.Ops.LogTo = io.Discard
	err = Run(context.Background(), c)
	if !errors.Is(err, executor.ErrMissingSecret) {
		t.Fatalf("Run: %v, want ErrMissingSecret", err)
	}
	for _, want := range []string{"weather", "WEATHER_TOKEN", "TOOLFLEET_SECRET_WEATHER_TOKEN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run: %v, want it to name %s", err, want)
		}
	}
}

// The executor program does not start when an MCP server of its tools file cannot be
// reached; the error names the server and carries what the process said.
func TestRunRefusesAnMCPServerThatCannotStart(t *testing.T) {
	opstest.Env(t, nil)
	srv := natstest.Start(t)
	file := filepath.Join(t.TempDir(), "tools.yaml")
	err := os.WriteFile(file, []byte(`
mcpServers:
  - name: broken
    command: {argv: [sh, -c, "echo 'no such database' >&2; exit 1"]}
    connectTimeout: 300ms
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse([]string{"-nats-url", srv.URL(), "-ops-addr", "off", "-tools-file", file}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c.Ops.LogTo = io.Discard
	err = Run(context.Background(), c)
	for _, want := range []string{"broken", "no connection within 300ms", "no such database"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run: %v, want it to say %s", err, want)
		}
	}
}
