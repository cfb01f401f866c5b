// Command toolfleet-sandbox is the sandbox launcher of toolfleet's executor: the
// executor (and toolfleet, and any program that runs command tools) starts each
// sandboxed command through it, and it confines itself (Landlock, seccomp, no
// capability) and execs the command. It imports pkg/sandbox alone, so it starts in a
// few milliseconds, where a re-exec of the executor's own binary first runs the init
// of every package the executor links.
//
// It is used where it is installed beside the running binary, or named by
// TOOLFLEET_SANDBOX_LAUNCHER; probed once, it must speak the executor's launch
// protocol (the same build), or the executor falls back to re-executing itself and
// warns. Run by hand, it says what it is and exits 2.
package main

import "github.com/toolfleet/toolfleet/pkg/sandbox"

func main() { sandbox.Main() }
