package ops

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// The exit codes and outputs of Main's own subcommands and of a program's errors.
func TestMainExitCodes(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	parse := func(args []string, out io.Writer) (string, error) {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.SetOutput(out)
		fail := fs.String("fail", "", "how run fails: config or runtime")
		err := fs.Parse(args)
		return *fail, err
	}
	run := func(_ context.Context, fail string) error {
		switch fail {
		case "config":
			return fmt.Errorf("starting: %w", ConfigError(errors.New("OPENAI_API_KEY is not set")))
		case "runtime":
			return errors.New("NATS is gone")
		}
		return nil
	}
	for _, tc := range []struct {
		args         []string
		code         int
		stdout, says string
	}{
		{[]string{"version"}, 0, "prog ", ""},
		{[]string{"help"}, 0, "", "-fail"},
		{[]string{"-h"}, 0, "", "-fail"},
		{[]string{"--help"}, 0, "", "-fail"},
		{nil, 0, "", ""},
		{[]string{"-nope"}, 2, "", "bad configuration"},
		{[]string{"-fail", "config"}, 2, "", `"error":"starting: OPENAI_API_KEY is not set"`},
		{[]string{"-fail", "runtime"}, 1, "", `"message":"prog stopped"`},
	} {
		var stdout, stderr bytes.Buffer
		code := MainContext(context.Background(), "prog", tc.args, &stdout, &stderr, parse, run)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q and %q", tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.says)
		}
	}
}

// version says the module version, the VCS revision and time when the build has them,
// and the Go version.
func TestBuildInfo(t *testing.T) {
	b := Build("prog")
	if b.Program != "prog" || b.Version == "" || !strings.HasPrefix(b.GoVersion, "go") || b.Platform == "" {
		t.Fatalf("%+v", b)
	}
	withVCS := BuildInfo{Program: "toolfleet", Version: "v1.2.3", Revision: "0123456789abcdef0123", Time: "2026-05-01T10:00:00Z", Modified: true, GoVersion: "go1.26.0", Platform: "linux/amd64"}
	if got, want := withVCS.String(), "toolfleet v1.2.3 (revision 0123456789ab, modified, 2026-05-01T10:00:00Z) go1.26.0 linux/amd64"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if s := (BuildInfo{Program: "x", Version: "(devel)"}).String(); !strings.Contains(s, "no VCS revision") {
		t.Errorf("without VCS: %q", s)
	}
}
