//go:build linux

package sandbox

import (
	"encoding/binary"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// decide runs the filters of p, as the kernel would, on one system call: its number,
// the audit architecture it was made under, and its arguments. Of the filters'
// answers the strictest counts: the lowest action, compared signed.
func decide(t *testing.T, p Policy, nr int, auditArch uint32, args ...uint64) uint32 {
	t.Helper()
	progs, err := filterPrograms(p)
	if err != nil {
		t.Fatal(err)
	}
	// struct seccomp_data, each 32-bit word where the filter loads it; the VM loads
	// big-endian words, so each is written so, the low half of an argument first (a
	// little-endian machine's layout, which the filter is built for on amd64 and arm64).
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], uint32(nr))
	binary.BigEndian.PutUint32(data[4:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	answer := uint32(unix.SECCOMP_RET_ALLOW)
	for _, raw := range progs {
		prog := make([]bpf.Instruction, len(raw))
		for i, r := range raw {
			prog[i] = r.Disassemble()
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		ret, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		if action := uint32(ret) & unix.SECCOMP_RET_ACTION_FULL; int32(action) < int32(answer&unix.SECCOMP_RET_ACTION_FULL) {
			answer = uint32(ret)
		}
	}
	return answer
}

// The filter's decisions, call by call: sockets by family, type and protocol under
// read-only and network policies, socketpair, io_uring, metadata changes, and any call
// made under a foreign ABI (the kernel's compat entry points) kills the process rather
// than falling through to allow.
func TestFilterDecisions(t *testing.T) {
	a, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	nr := func(name string) int {
		n, ok := a.SyscallNames[name]
		if !ok {
			t.Fatalf("no %s on %s", name, a.Name)
		}
		return n
	}
	foreign := uint32(arch.I386.ID)
	if a == arch.AARCH64 {
		foreign = uint32(arch.ARM.ID)
	}
	const (
		allow  = unix.SECCOMP_RET_ALLOW
		eacces = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		kill   = unix.SECCOMP_RET_KILL_PROCESS
	)
	native := uint32(a.ID)
	readOnly, network, writes := ReadOnly(), Policy{Network: true}, Policy{Write: []string{"/tmp"}}
	stream := uint64(unix.SOCK_STREAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK)
	tests := []struct {
		name string
		p    Policy
		nr   int
		arch uint32
		args []uint64
		want uint32
	}{
		{"getpid", readOnly, nr("getpid"), native, nil, allow},
		{"getpid under a foreign ABI", readOnly, nr("getpid"), foreign, nil, kill},
		{"socket under a foreign ABI", network, nr("socket"), foreign, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, kill},
		{"read-only TCP socket", readOnly, nr("socket"), native, []uint64{unix.AF_INET, stream, 0}, eacces},
		{"read-only UDP socket", readOnly, nr("socket"), native, []uint64{unix.AF_INET6, unix.SOCK_DGRAM, 0}, eacces},
		{"read-only unix socket", readOnly, nr("socket"), native, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, eacces},
		{"network TCP socket", network, nr("socket"), native, []uint64{unix.AF_INET, stream, 0}, allow},
		{"network TCP6 socket, IPPROTO_TCP", network, nr("socket"), native, []uint64{unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP}, allow},
		{"network UDP socket", network, nr("socket"), native, []uint64{unix.AF_INET, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, unix.IPPROTO_UDP}, allow},
		{"network ICMP datagram socket", network, nr("socket"), native, []uint64{unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP}, eacces},
		{"network raw socket", network, nr("socket"), native, []uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP}, eacces},
		{"network SCTP over a stream", network, nr("socket"), native, []uint64{unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, eacces},
		{"network unix socket", network, nr("socket"), native, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, eacces},
		{"network netlink socket", network, nr("socket"), native, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, eacces},
		{"network packet socket", network, nr("socket"), native, []uint64{unix.AF_PACKET, unix.SOCK_DGRAM, 0}, eacces},
		{"network TCP socket, high bits in the family", network, nr("socket"), native, []uint64{1<<32 | unix.AF_INET, unix.SOCK_STREAM, 0}, eacces},
		{"network socket of type 0", network, nr("socket"), native, []uint64{unix.AF_INET, 0, 0}, eacces},
		{"network TCP socket, high bits in the protocol", network, nr("socket"), native, []uint64{unix.AF_INET, unix.SOCK_STREAM, 1 << 40}, eacces},
		{"stream socketpair of another family", network, nr("socketpair"), native, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, eacces},
		{"stream socketpair", readOnly, nr("socketpair"), native, []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, allow},
		{"seqpacket socketpair", network, nr("socketpair"), native, []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET, 0}, allow},
		{"datagram socketpair", network, nr("socketpair"), native, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, eacces},
		{"io_uring", network, nr("io_uring_setup"), native, []uint64{8, 0}, eperm},
		{"read-only fchmodat", readOnly, nr("fchmodat"), native, nil, eperm},
		{"read-only fchownat", readOnly, nr("fchownat"), native, nil, eperm},
		{"read-only utimensat", readOnly, nr("utimensat"), native, nil, eperm},
		{"read-only fsetxattr", readOnly, nr("fsetxattr"), native, nil, eperm},
		{"fchmodat with write paths", writes, nr("fchmodat"), native, nil, allow},
	}
	for _, tt := range tests {
		if got := decide(t, tt.p, tt.nr, tt.arch, tt.args...); got != tt.want {
			t.Errorf("%s: %#x, want %#x", tt.name, got, tt.want)
		}
	}
}
