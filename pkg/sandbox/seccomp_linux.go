//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filters are built with github.com/elastic/go-seccomp-bpf, a pure-Go
// policy assembler kept by Elastic for Beats: it has the x86_64 and aarch64 syscall
// tables, argument conditions and the x32 guard. Two things it gets wrong are worked
// around here:
//   - a call made under another ABI (int 0x80 on x86_64, a 32-bit program on arm64)
//     falls through to the policy's default action, allow here: the first filter
//     starts with three instructions of ours that kill such a process;
//   - after a call's argument conditions fail, it goes on comparing the loaded
//     argument, not the call's number, with the calls that follow (v1.6.0): so a call
//     with conditions is only ever the last one of its filter, and each such call
//     gets a filter of its own. The kernel runs every filter and takes the strictest
//     answer.

// errnoAction is the filter's answer that makes a system call fail with errno, as a
// refused permission does; the program sees a clear error and goes on.
func errnoAction(errno unix.Errno) seccomp.Action {
	return seccomp.ActionErrno | seccomp.Action(errno)
}

// nativeArch is the architecture the filter is built for: x86_64 or aarch64, the two
// whose tables the sandbox knows (and on which no socket call hides behind socketcall).
func nativeArch() (*arch.Info, error) {
	switch runtime.GOARCH {
	case "amd64":
		return arch.X86_64, nil
	case "arm64":
		return arch.AARCH64, nil
	}
	return nil, fmt.Errorf("%w: the sandbox's seccomp filter is built for amd64 and arm64 only, not %s", ErrUnsupported, runtime.GOARCH)
}

// Conditions on a socket type argument, whose low four bits (the kernel's
// SOCK_TYPE_MASK) are the type and the rest SOCK_NONBLOCK and SOCK_CLOEXEC.
func typeBits(set, clear uint64) seccomp.ArgumentConditions {
	var c seccomp.ArgumentConditions
	for bit := uint64(1); bit <= 8; bit <<= 1 {
		if set&bit != 0 {
			c = append(c, seccomp.Condition{Argument: 1, Operation: seccomp.BitsSet, Value: bit})
		}
	}
	if clear != 0 {
		c = append(c, seccomp.Condition{Argument: 1, Operation: seccomp.BitsNotSet, Value: clear})
	}
	return c
}

func notEqual(arg uint32, values ...uint64) seccomp.ArgumentConditions {
	var c seccomp.ArgumentConditions
	for _, v := range values {
		c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.NotEqual, Value: v})
	}
	return c
}

// deniedSockets are the socket calls a policy with the network refuses, as conditions
// any one of which refuses: all but AF_INET and AF_INET6 TCP (SOCK_STREAM, protocol 0
// or IPPROTO_TCP) and UDP (SOCK_DGRAM, 0 or IPPROTO_UDP). Values with high bits set
// count as other values, and are refused.
func deniedSockets() []seccomp.NameWithConditions {
	sets := []seccomp.ArgumentConditions{
		notEqual(0, unix.AF_INET, unix.AF_INET6),
		{{Argument: 1, Operation: seccomp.BitsSet, Value: 0xc}}, // type 4 to 15
		typeBits(3, 0), // type 3 (SOCK_RAW)
		{{Argument: 1, Operation: seccomp.BitsNotSet, Value: 0x3}}, // type 0
		append(typeBits(unix.SOCK_STREAM, 0xf&^unix.SOCK_STREAM), notEqual(2, 0, unix.IPPROTO_TCP)...),
		append(typeBits(unix.SOCK_DGRAM, 0xf&^unix.SOCK_DGRAM), notEqual(2, 0, unix.IPPROTO_UDP)...),
	}
	out := make([]seccomp.NameWithConditions, len(sets))
	for i, c := range sets {
		out[i] = seccomp.NameWithConditions{Name: "socket", Conditions: c}
	}
	return out
}

// deniedSocketpairs are the socketpair calls refused whatever the policy: all but
// AF_UNIX stream and seqpacket pairs (types 1 and 5), which reach nothing but each
// other. A datagram pair is refused: its sendto with an address reaches any unix
// socket by its path.
func deniedSocketpairs() []seccomp.NameWithConditions {
	sets := []seccomp.ArgumentConditions{
		notEqual(0, unix.AF_UNIX),
		{{Argument: 1, Operation: seccomp.BitsNotSet, Value: 0x1}}, // even types
		{{Argument: 1, Operation: seccomp.BitsSet, Value: 0xa}},    // 3, 7, 9, 11, ...
	}
	out := make([]seccomp.NameWithConditions, len(sets))
	for i, c := range sets {
		out[i] = seccomp.NameWithConditions{Name: "socketpair", Conditions: c}
	}
	return out
}

// metadataCalls change a file's mode, owner, extended attributes or times, which
// Landlock does not confine: a sandbox without write paths refuses them all. Names
// missing from an architecture's table (arm64 has no chmod, only fchmodat) are
// skipped.
var metadataCalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2",
	"chown", "fchown", "lchown", "fchownat",
	"setxattr", "lsetxattr", "fsetxattr", "setxattrat",
	"removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"utime", "utimes", "utimensat", "futimesat",
}

// seccompPolicies are the filters of p, each allowing what it does not name:
//   - socket: with Network, AF_INET and AF_INET6 TCP and UDP only (see
//     deniedSockets); without, nothing at all. Unix, netlink, packet, raw, ICMP,
//     vsock sockets are refused either way, EACCES;
//   - socketpair: AF_UNIX stream and seqpacket pairs only (see deniedSocketpairs),
//     EACCES;
//   - io_uring: refused (EPERM), since its operations open and connect sockets
//     behind the filter's back;
//   - without write paths, changes of any file's metadata (see metadataCalls): EPERM.
func seccompPolicies(p Policy, a *arch.Info) []seccomp.Policy {
	groups := []seccomp.SyscallGroup{
		{Names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, Action: errnoAction(unix.EPERM)},
	}
	if len(p.Write) == 0 {
		var names []string
		for _, name := range metadataCalls {
			if _, ok := a.SyscallNames[name]; ok {
				names = append(names, name)
			}
		}
		groups = append(groups, seccomp.SyscallGroup{Names: names, Action: errnoAction(unix.EPERM)})
	}
	if p.Network {
		groups = append(groups, seccomp.SyscallGroup{NamesWithCondtions: deniedSockets(), Action: errnoAction(unix.EACCES)})
	} else {
		groups = append(groups, seccomp.SyscallGroup{Names: []string{"socket"}, Action: errnoAction(unix.EACCES)})
	}
	return []seccomp.Policy{
		{DefaultAction: seccomp.ActionAllow, Syscalls: groups},
		{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{
			{NamesWithCondtions: deniedSocketpairs(), Action: errnoAction(unix.EACCES)},
		}},
	}
}

// filterPrograms are the seccomp filters of p for this architecture, assembled.
func filterPrograms(p Policy) ([][]bpf.RawInstruction, error) {
	a, err := nativeArch()
	if err != nil {
		return nil, err
	}
	var out [][]bpf.RawInstruction
	for i, pol := range seccompPolicies(p, a) {
		body, err := pol.Assemble()
		if err != nil {
			return nil, fmt.Errorf("seccomp filter: %w", err)
		}
		if i == 0 {
			body = append([]bpf.Instruction{
				bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(a.ID), SkipTrue: 1},
				bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
			}, body...)
		}
		raw, err := bpf.Assemble(body)
		if err != nil {
			return nil, fmt.Errorf("seccomp filter: %w", err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// CheckSeccomp reports whether this kernel and architecture can hold the sandbox's
// seccomp filter: nil, or an error wrapping [ErrUnsupported] that says what is missing.
func CheckSeccomp() error {
	if _, err := nativeArch(); err != nil {
		return err
	}
	for _, action := range []uint32{unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_ERRNO} {
		a := action
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a))); errno != 0 {
			return fmt.Errorf("%w: this kernel cannot filter system calls (seccomp filters with kill-process and errno actions, Linux ≥ 4.14 with CONFIG_SECCOMP_FILTER): %v", ErrUnsupported, errno)
		}
	}
	return nil
}

// loadFilters installs progs on the calling thread, which must have no_new_privs set
// and stay locked to the goroutine until it execs.
func loadFilters(progs [][]bpf.RawInstruction) error {
	for _, prog := range progs {
		if err := loadFilter(prog); err != nil {
			return err
		}
	}
	return nil
}

func loadFilter(prog []bpf.RawInstruction) error {
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
