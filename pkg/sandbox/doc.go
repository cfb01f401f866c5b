// Package sandbox runs a program confined by Landlock (Linux ≥ 5.13) and a seccomp
// filter: it may read only the paths it is granted, write only the paths it is
// granted, open no socket unless allowed (and then TCP and UDP only), and holds no
// capability, even when started by root. A write or a socket outside the grant fails
// inside the program (EACCES), as it would for a file it has no permission to.
//
// # How a child is confined
//
// Landlock restricts the calling thread and what it starts later, and Go runs no code
// of its own between fork and exec. So [Command] starts a launcher, marked by a hidden
// argv[0], with the policy and the program's argv as its arguments. The launcher
// applies Landlock to itself; then,
// on the thread that execs: empties the capability bounding set (where it may: a root
// launcher), switches to [Policy].RunAs if set, drops every other capability, sets the
// parent-death signal (SIGKILL: the program dies with the process that started it),
// no_new_privs and the seccomp filter; then it execve's the program, which inherits all
// of it for good, with everything it starts. The process keeps its pid, so the caller's
// process group, timeout and kill work as for any child.
//
// The launcher is a program of its own, cmd/toolfleet-sandbox ([Main] is all of it),
// where one is installed beside the running binary ([LauncherName]) or named by
// [LauncherEnv]: it links this package alone and starts in a few milliseconds. Else it
// is the running binary started again (/proc/self/exe), which first runs the init of
// every package it links (about 30 ms for the executor's). The two must agree on the
// launch protocol (the argv, the spec's JSON, the guard's lifeline), which is
// versioned: a launcher program is probed once, running itself confined, and one that
// fails (missing, broken, of another build) is not used; [Launcher] says why, and the
// running binary launches instead. A launcher refuses a spec of another version, or
// with a field it does not know, rather than run the program less confined.
//
// Every program that runs sandboxed commands calls [Init] first thing in main (and test
// binaries in TestMain): in the launcher Init never returns, elsewhere it returns at
// once. [Command] refuses to start anything where Init was not called, rather than have
// the binary's main run with the launcher's arguments.
//
// # What a sandboxed program may do
//
// Read (and execute): [SystemPaths] (/bin, /sbin, /usr, /lib*, /etc, /opt, /proc, /dev,
// those that exist), the program itself, its working directory, and [Policy].Read.
// Write: [Policy].Write, and /dev/null. Nothing else, not even /tmp: a program that
// needs scratch space is granted a directory of its own. /proc is readable, but a
// sandboxed process cannot read another process's memory, environment or open files
// outside its domain (Landlock scopes ptrace, and it holds no CAP_SYS_PTRACE), and from
// ABI 6 on it cannot signal one either, nor reach an abstract unix socket outside it.
// Without write paths, changing any file's mode, owner, extended attributes or times
// (chmod, chown, setxattr, utimes and their variants, which Landlock does not cover) is
// refused by the seccomp filter (EPERM).
//
// Network: the seccomp filter decides which sockets a program may open. With Network
// false, none: socket() fails with EACCES whatever the family (IPv4 and IPv6 TCP and
// UDP, unix, netlink, packet, raw), and Landlock denies TCP connect and bind as well
// (ABI ≥ 4, Linux ≥ 6.7). With Network true, IPv4 and IPv6 TCP and UDP only; unix,
// netlink, packet, raw and ICMP sockets are still refused. socketpair() is allowed for
// AF_UNIX stream and seqpacket pairs only (they reach nothing but each other; a
// datagram pair could address any unix socket by path). io_uring is refused (EPERM):
// its operations open and connect sockets where the filter cannot see them.
//
// The filter is built for amd64 and arm64 (github.com/elastic/go-seccomp-bpf); a system
// call made under another ABI (32-bit calls on a 64-bit kernel) kills the program.
// [CheckSeccomp] says whether the kernel and architecture can hold it.
//
// # Privileges
//
// A launcher started by root empties its capability bounding set, and every launcher
// drops its effective, permitted, inheritable and ambient capabilities: with
// no_new_privs, nothing the program execs can gain one back. A root executor's
// sandboxed program is still uid 0, so the files root owns are its by ownership (the
// policy decides which it may read or write); [Policy].RunAs runs it as an
// unprivileged user instead, which the launcher (root) switches to before it execs.
//
// # Dying with the process that started it
//
// The launcher's parent-death signal kills the program when the executor's thread that
// started it ends. What the program starts (a shell's pipeline, a server's workers) is
// out of that signal's reach: [Guard] has a whole process group killed when the calling
// process dies, SIGKILL included. The guard is the launcher started once more (marked
// by its argv[0]; [Init] and [Main] run it), in a group of its own,
// reading a pipe whose other end only the calling process holds: when that process
// dies, the kernel closes the pipe, and the guard kills the groups still listed.
//
// # Kernels without Landlock
//
// A policy needs ABI 3 (Linux 6.2: truncation is confined, so a granted read cannot be
// turned into a truncate) and ABI 4 when it denies the network ([Policy.MinABI]), and
// seccomp filters on amd64 or arm64. Where the kernel has less, [Policy.CheckABI] and
// [CheckSeccomp] say so and the caller refuses to serve the tool; the launcher checks
// again and exits with [ExitSetup] rather than run the program unconfined. Nothing
// ever runs with less confinement than asked.
package sandbox
