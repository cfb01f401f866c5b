package clustertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// On two cores a benchmark is CPU-bound and shares the machine, so calls/s drift from
// run to run; what a call costs in CPU does not. A benchmark case takes a snapshot of
// the costs before and after its calls and reports them per call: the CPU of this
// process (executors or raw workers, and the load generators) and of the nat-server
// processes, and the servers' traffic (messages in and out, JetStream API requests),
// read from their monitoring endpoints.

// costs is a snapshot of what the benchmark's processes spent so far.
type costs struct {
	proc, servers   time.Duration
	inMsgs, outMsgs int64
	apiRequests     int64
	monitorFailures int
}

// snapshot reads the costs so far: this process's rusage, each node's /proc stat and
// its /varz and /jsz monitoring pages (monitor[i] is node i's monitoring port).
func (c *cluster) snapshot(b *testing.B, monitor []int) costs {
	var s costs
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.proc = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for i, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			s.servers += procCPU(n.cmd.Process.Pid)
		}
		if i >= len(monitor) {
			continue
		}
		var varz struct {
			InMsgs  int64 `json:"in_msgs"`
			OutMsgs int64 `json:"out_msgs"`
		}
		var jsz struct {
			API struct {
				Total int64 `json:"total"`
			} `json:"api"`
		}
		if getJSON(monitor[i], "varz", &varz) != nil || getJSON(monitor[i], "jsz", &jsz) != nil {
			s.monitorFailures++
			continue
		}
		s.inMsgs += varz.InMsgs
		s.outMsgs += varz.OutMsgs
		s.apiRequests += jsz.API.Total
	}
	return s
}

// report adds the costs between from and to, per call, to b's metrics.
func (to costs) report(b *testing.B, from costs, calls int) {
	if calls == 0 {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(calls) }
	b.ReportMetric(per(to.proc-from.proc), "proc-cpu-µs/call")
	b.ReportMetric(per(to.servers-from.servers), "srv-cpu-µs/call")
	b.ReportMetric(per(to.proc-from.proc+to.servers-from.servers), "cpu-µs/call")
	if to.monitorFailures == 0 && from.monitorFailures == 0 {
		b.ReportMetric(float64(to.inMsgs-from.inMsgs)/float64(calls), "srv-in/call")
		b.ReportMetric(float64(to.outMsgs-from.outMsgs)/float64(calls), "srv-out/call")
		b.ReportMetric(float64(to.apiRequests-from.apiRequests)/float64(calls), "js-api/call")
	}
}

// procCPU is the user and system CPU of process pid so far (0 if it cannot be read).
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command may hold spaces and parentheses; the fields start after the last ')'.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64) // field 14 of stat(5)
	stime, _ := strconv.ParseInt(fields[12], 10, 64) // field 15
	const ticksPerSecond = 100                       // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

func getJSON(port int, page string, v any) error {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/%s", port, page))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// profileServers starts a CPU profile of every node, for profileSeconds of the load, when
// TOOLFLEET_BENCH_SERVER_PROFILE names a folder; the returned func waits for them.
func (sc shardCase) profileServers(b *testing.B, kind string) (wait func()) {
	dir := os.Getenv("TOOLFLEET_BENCH_SERVER_PROFILE")
	if dir == "" {
		return func() {}
	}
	const profileSeconds = 3
	name := strings.NewReplacer("/", "_", "=", "").Replace(b.Name())
	var wg sync.WaitGroup
	for i, port := range sc.prof {
		wg.Go(func() {
			client := http.Client{Timeout: (profileSeconds + 10) * time.Second}
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", port, profileSeconds))
			if err != nil {
				b.Logf("profile of node %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s-n%d.pprof", name, kind, i)), raw, 0o644)
			}
			if err != nil {
				b.Logf("profile of node %d: %v", i, err)
			}
		})
	}
	return wg.Wait
}
