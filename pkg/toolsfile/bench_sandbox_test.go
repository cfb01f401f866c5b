package toolsfile

import (
	"context"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// BenchmarkCommandSandbox is what the read-only sandbox costs a command tool's run:
// /bin/true started directly, and through the launcher (a re-exec of this binary that
// applies Landlock, then execs it).
func BenchmarkCommandSandbox(b *testing.B) {
	if abi, _ := sandbox.ABI(); abi < 4 {
		b.Skip("Landlock ABI < 4")
	}
	for _, bc := range []struct {
		name   string
		policy *sandbox.Policy
	}{{"direct", nil}, {"read-only-sandbox", &sandbox.Policy{}}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Command{Argv: []string{"/bin/true"}, Dir: b.TempDir(), policy: bc.policy}
			for b.Loop() {
				if _, err := c.run(context.Background(), "t", nil, []byte(`{}`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
