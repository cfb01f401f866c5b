//go:build linux

package toolsfile

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// BenchmarkCommandSandbox is what the read-only sandbox costs a command tool's run:
// /bin/true started directly; through a re-exec of this binary (the launcher where no
// launcher program is installed), which applies Landlock, then execs it; and through
// the launcher program (cmd/toolfleet-sandbox, which TestMain built), which does the
// same without this binary's package inits.
func BenchmarkCommandSandbox(b *testing.B) {
	if abi, _ := sandbox.ABI(); abi < 4 {
		b.Skip("Landlock ABI < 4")
	}
	program := os.Getenv(sandbox.LauncherEnv)
	for _, bc := range []struct {
		name     string
		policy   *sandbox.Policy
		launcher string // LauncherEnv: "" re-executes this binary
	}{
		{"direct", nil, ""},
		{"read-only-sandbox", &sandbox.Policy{}, ""},
		{"read-only-sandbox-launcher", &sandbox.Policy{}, program},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.Setenv(sandbox.LauncherEnv, bc.launcher)
			want := bc.launcher
			if want == "" {
				want = sandbox.SelfLauncher
			}
			if got, err := sandbox.Launcher(); bc.policy != nil && got != want {
				b.Fatalf("the launcher is %q (%v), want %q", got, err, want)
			}
			c := &Command{Argv: []string{"/bin/true"}, Dir: b.TempDir(), policy: bc.policy}
			before := childCPU(b)
			for b.Loop() {
				if _, err := c.run(context.Background(), "t", nil, []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
			}
			// The CPU the command's process used (launcher and program), which a loaded
			// machine inflates less than the wall time.
			b.ReportMetric(float64(childCPU(b)-before)/float64(time.Millisecond)/float64(b.N), "child-cpu-ms/op")
		})
	}
}

// childCPU is the user and system CPU time of the waited-for children of this process.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
