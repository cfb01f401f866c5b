package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process of a system under test, in a process group of its own so that
// it and whatever it forks (PostgreSQL's backends) are stopped together.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string        // its stdout and stderr
	done chan struct{} // closed once it has exited
	err  error         // its exit, once done
}

// startProc starts argv with its output in dir/<name>.log. Its waiting goroutine ends
// when the process does; stop ends the process.
func startProc(name, dir string, env []string, argv ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited is an error if p has exited, saying how and with the end of its log.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); the end of its log:\n%s", p.name, p.err, p.tail())
	default:
		return nil
	}
}

// tail is the last lines of p's log.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-15):], []byte("\n")))
}

// stop signals p's process group with sig, then kills it if it has not exited
// within grace. It waits for p either way.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-pgid, sig) // ESRCH: it is already gone
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// clockTick is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go runs on.
const clockTick = 10 * time.Millisecond

// cpuOf is the CPU time (user and system) used so far by the processes of roots and
// every process below them, counting descendants that have exited and been waited for
// (through their parents' cutime and cstime).
func cpuOf(roots []*proc) (time.Duration, error) {
	type stat struct {
		ppid  int
		ticks int64
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	stats := map[int]stat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		ppid, ticks, err := parseStat(string(b))
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		stats[pid] = stat{ppid, ticks}
		children[ppid] = append(children[ppid], pid)
	}
	var total int64
	var walk func(pid int)
	walk = func(pid int) {
		total += stats[pid].ticks
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, p := range roots {
		walk(p.cmd.Process.Pid)
	}
	return time.Duration(total) * clockTick, nil
}

// parseStat reads a /proc/<pid>/stat line's parent and its utime, stime, cutime and
// cstime added up. The command name (field 2) is in parentheses and may hold spaces.
func parseStat(line string) (ppid int, ticks int64, err error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, errors.New("no command name")
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("%d fields after the name, want at least 15", len(f))
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	for _, s := range f[11:15] { // fields 14–17
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		ticks += n
	}
	return ppid, ticks, nil
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago, for a program that
// takes a port number rather than a listener.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitFor calls ok until it returns nil, ctx ends, limit passes or one of procs exits.
func waitFor(ctx context.Context, what string, limit time.Duration, procs []*proc, ok func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ok(ctx)
		if err == nil {
			return nil
		}
		for _, p := range procs {
			if perr := p.exited(); perr != nil {
				return fmt.Errorf("waiting for %s: %w", what, perr)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w", what, limit, err)
		case <-tick.C:
		}
	}
}

// dialable is whether addr accepts TCP connections.
func dialable(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// cleanEnv is the environment without variables that would change how a system
// under test is configured (TOOLFLEET_*, DBOS_*, TEMPORAL_*, PG*).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TOOLFLEET_") || strings.HasPrefix(name, "DBOS_") || strings.HasPrefix(name, "DBOS__") ||
			strings.HasPrefix(name, "TEMPORAL_") || strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
