package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/sandbox"
)

// probeEnv, when set, makes the test binary a probe instead of running the tests: run
// under a policy, it tries what its value names and says what became of it.
const probeEnv = "TOOLFLEET_SANDBOX_PROBE"

// probe tries each of the space-separated attempts and prints one line per attempt,
// "ok" or the error:
//
//	udp:ADDR tcp:ADDR unix:PATH      send a byte ("x") over a new connection
//	socket:DOMAIN:TYPE:PROTO         open a socket (numbers)
//	socketpair:TYPE                  an AF_UNIX pair
//	chmod:PATH  chown:PATH  touch:PATH  change a file's mode, owner (own uid), times
//	read:PATH                        read a file
//	status                           the Uid, Gid, Groups, Cap*, NoNewPrivs and Seccomp lines of /proc/self/status
func probe(attempts string) int {
	for _, a := range strings.Fields(attempts) {
		op, arg, _ := strings.Cut(a, ":")
		var err error
		switch op {
		case "udp", "tcp", "unix":
			var c net.Conn
			if c, err = net.DialTimeout(op, arg, 5*time.Second); err == nil {
				_, err = c.Write([]byte("x"))
				c.Close()
			}
		case "socket":
			var n [3]int
			for i, f := range strings.SplitN(arg, ":", 3) {
				n[i], _ = strconv.Atoi(f)
			}
			var fd int
			if fd, err = syscall.Socket(n[0], n[1], n[2]); err == nil {
				syscall.Close(fd)
			}
		case "socketpair":
			typ, _ := strconv.Atoi(arg)
			var fds [2]int
			if fds, err = syscall.Socketpair(syscall.AF_UNIX, typ, 0); err == nil {
				syscall.Close(fds[0])
				syscall.Close(fds[1])
			}
		case "chmod":
			err = os.Chmod(arg, 0o666)
		case "chown":
			err = os.Chown(arg, os.Getuid(), os.Getgid())
		case "touch":
			err = os.Chtimes(arg, time.Unix(1, 0), time.Unix(1, 0))
		case "read":
			_, err = os.ReadFile(arg)
		case "status":
			b, rerr := os.ReadFile("/proc/self/status")
			if rerr != nil {
				err = rerr
				break
			}
			var keep []string
			for _, line := range strings.Split(string(b), "\n") {
				for _, k := range []string{"Uid:", "Gid:", "Groups:", "Cap", "NoNewPrivs:", "Seccomp:"} {
					if strings.HasPrefix(line, k) {
						keep = append(keep, strings.Join(strings.Fields(line), " "))
					}
				}
			}
			fmt.Println(strings.Join(keep, "; "))
			continue
		default:
			err = fmt.Errorf("unknown probe %q", op)
		}
		if err != nil {
			fmt.Println(a, err)
		} else {
			fmt.Println(a, "ok")
		}
	}
	return 0
}

// runProbe runs this binary as a probe of attempts under p, in dir, and returns its
// lines by attempt.
func runProbe(t *testing.T, p sandbox.Policy, dir string, attempts ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := sandbox.Command(ctx, p, exe)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	cmd.Dir = dir
	cmd.Env = []string{probeEnv + "=" + strings.Join(attempts, " ")}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("probe %v: %v\n%s%s", attempts, err, out.String(), errOut.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		a, res, _ := strings.Cut(line, " ")
		if a == "Uid:" || strings.HasPrefix(line, "Uid:") {
			got["status"] = line
			continue
		}
		got[a] = res
	}
	return got
}
