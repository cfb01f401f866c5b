// Package sandbox runs a program confined by Landlock (Linux ≥ 5.13): it may read only
// the paths it is granted, write only the paths it is granted, and, unless allowed,
// neither connect nor bind a TCP socket. A write or a connect outside the grant fails
// inside the program (EACCES), as it would for a file it has no permission to.
//
// # How a child is confined
//
// Landlock restricts the calling thread and what it starts later, and Go runs no code
// of its own between fork and exec. So [Command] starts the running binary again
// (/proc/self/exe) as a small launcher, marked by a hidden argv[0], with the policy and
// the program's argv as its arguments. The launcher applies Landlock to itself and then
// execve's the program, which inherits the restriction (and no_new_privs) for good,
// with everything it starts. The process keeps its pid, so the caller's process group,
// timeout and kill work as for any child.
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
// sandboxed process cannot read another process's memory or environment outside its
// domain (Landlock denies ptrace access to it), and from ABI 6 on it cannot signal one
// either, nor reach an abstract unix socket outside it.
//
// Network: with Network false, TCP connect and bind are denied (Landlock ABI ≥ 4, Linux
// ≥ 6.7); UDP is confined from ABI 10 on, so on older kernels a sandboxed program can
// still send UDP datagrams (a DNS query, say). Pathname unix sockets are confined from
// ABI 9.
//
// # Kernels without Landlock
//
// A policy needs ABI 3 (Linux 6.2: truncation is confined, so a granted read cannot be
// turned into a truncate) and ABI 4 when it denies the network ([Policy.MinABI]). Where
// the kernel has less, [Policy.CheckABI] says so and the caller refuses to serve the
// tool; the launcher checks again and exits with [ExitSetup] rather than run the program
// unconfined. Nothing ever runs with less confinement than asked.
package sandbox
