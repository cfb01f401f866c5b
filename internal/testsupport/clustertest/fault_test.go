package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// The load: calls per second of each tool, and the tools (one idempotent, one not).
const (
	callsPerSecond = 40
	toolIdem       = "echo"
	toolOnce       = "charge"
	// stallSlack is what a tool may stall beyond the election a fault caused; the
	// election counted is at least minElection, so that an event without an election (a
	// node started again) or whose leaders moved at once (a graceful stop) still leaves a
	// loaded 2-core machine some room: such stalls measured 0.1–1.3s (the outside client's
	// own publish timeout is 1s).
	stallSlack  = 2 * time.Second
	minElection = 2 * time.Second
)

var toolNames = []string{toolIdem, toolOnce}

// TestClusterFaults: see the package documentation.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node NATS cluster and runs faults under load for one to two minutes")
	}
	bin := buildNATSServer(t)
	c := startCluster(t, bin)
	cfg := events.Config{Replicas: 3}

	// The executors start with the cluster, before it has a meta leader: their setup
	// must wait for it, not fail.
	runs := &runCounter{n: map[string]int{}}
	t0 := time.Now()
	var exs []*runningExecutor
	for i := range 2 {
		exs = append(exs, startExecutor(t, c, i, cfg, runs))
	}
	for _, ex := range exs {
		select {
		case <-ex.ex.Ready():
		case err := <-ex.done:
			t.Fatalf("executor %d stopped before serving: %v", ex.i, err)
		case <-time.After(90 * time.Second):
			t.Fatalf("executor %d not ready after 90s on a fresh cluster", ex.i)
		}
	}
	t.Logf("fresh cluster: both executors serving %s after %s", strings.Join(toolNames, ", "), time.Since(t0).Round(time.Millisecond))

	client := c.connect(t, "client", 0)
	js, err := jetstream.New(client)
	if err != nil {
		t.Fatal(err)
	}
	load := startLoad(t, js)

	// Each fault (a node stopped) and each node started again is an event; a stall is
	// laid to the first event during it, else the last before it.
	evs := []*fault{{what: "before the faults", at: load.started}}
	time.Sleep(8 * time.Second)
	tDuring := time.Now()
	restart := func(i int) {
		evs = append(evs, &fault{what: c.nodes[i].name + " started again", at: time.Now()})
		c.start(t, i)
		c.waitCurrent(t, js)
	}

	// 1. SIGKILL the node leading the calls stream; restart it 15s later.
	leader := c.streamLeader(t, js, events.StreamCalls)
	f := c.stop(t, js, leader, "SIGKILL of the calls stream's leader "+c.nodes[leader].name, true)
	evs = append(evs, f)
	time.Sleep(time.Until(f.at.Add(15 * time.Second)))
	restart(leader)
	time.Sleep(3 * time.Second)

	// 2. A rolling restart of every node (SIGTERM, as a StatefulSet rolls).
	for i := range c.nodes {
		evs = append(evs, c.stop(t, js, i, "rolling restart: SIGTERM to "+c.nodes[i].name, false))
		restart(i)
		time.Sleep(2 * time.Second)
	}
	tAfter := time.Now()
	time.Sleep(8 * time.Second)
	published := load.stop()
	tEnd := time.Now()

	// Every call ends with exactly one stored result: wait for the last ones (a call
	// delivered by a node that died comes back after the ack wait).
	results := c.waitResults(t, js, published, 2*cfg.WithDefaults().AckWait.D()+30*time.Second)

	// No call that ran was answered interrupted; the non-idempotent tool ran once per call.
	interrupted, failed := 0, 0
	for _, r := range results {
		switch {
		case r.res.Status == events.StatusInterrupted:
			interrupted++
			if interrupted <= 5 {
				t.Errorf("call %s (%s) answered interrupted: %v", r.res.CallID, r.res.Tool, r.res.Error)
			}
		case r.res.Status != events.StatusOK:
			failed++
			if failed <= 5 {
				t.Errorf("call %s (%s) answered %s: %v", r.res.CallID, r.res.Tool, r.res.Status, r.res.Error)
			}
		}
	}
	reruns := map[string]int{}
	for id, n := range runs.snapshot() {
		tool, _, _ := strings.Cut(id, "-")
		if n > 1 {
			reruns[tool] += n - 1
			if tool == toolOnce {
				t.Errorf("non-idempotent call %s ran %d times", id, n)
			}
		}
	}
	if interrupted+failed > 0 {
		t.Errorf("%d calls answered interrupted and %d failed, of %d", interrupted, failed, len(results))
	}

	// Throughput before, during and after the faults; each fault's election and stall.
	perTool := map[string][]time.Time{}
	for _, r := range results {
		perTool[r.res.Tool] = append(perTool[r.res.Tool], r.stored)
	}
	for _, ts := range perTool {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	}
	rate := func(from, to time.Time) float64 {
		n := 0
		for _, r := range results {
			if !r.stored.Before(from) && r.stored.Before(to) {
				n++
			}
		}
		return float64(n) / to.Sub(from).Seconds()
	}
	t.Logf("load: %d calls (%d/s of each of %s) from an outside client; results: %d, every call answered once",
		len(published), callsPerSecond, strings.Join(toolNames, ", "), len(results))
	t.Logf("calls/s: before the faults %.0f, during %.0f (%s), after %.0f",
		rate(load.started, tDuring), rate(tDuring, tAfter), tAfter.Sub(tDuring).Round(time.Second), rate(tAfter, tEnd))
	t.Logf("re-runs of idempotent calls (at least once is allowed): %d; of non-idempotent calls: %d", reruns[toolIdem], reruns[toolOnce])
	for _, tool := range toolNames {
		worst := stalls(perTool[tool], evs, tEnd)
		for k, f := range evs {
			w := worst[k]
			bound := max(f.election, minElection) + stallSlack
			if w.gap > bound {
				t.Errorf("%s: %s stalled %s, longer than the election (%s) plus %s",
					f.what, tool, w.gap.Round(time.Millisecond), f.election.Round(time.Millisecond), stallSlack)
			}
		}
	}
	for k, f := range evs {
		line := f.what + ":"
		if f.election > 0 {
			line += fmt.Sprintf(" every leader it held elected elsewhere after %s;", f.election.Round(time.Millisecond))
		}
		for _, tool := range toolNames {
			w := stalls(perTool[tool], evs, tEnd)[k]
			line += fmt.Sprintf(" %s: longest gap between results %s (served again %s after the event)", tool,
				w.gap.Round(time.Millisecond), w.resumed.Round(time.Millisecond))
		}
		t.Logf("%s", line)
	}
	for _, ex := range exs {
		ex.stop(t)
	}
}

// stall is the longest gap between two results laid to an event, and when after the
// event it ended (the fleet served again).
type stall struct{ gap, resumed time.Duration }

// stalls lays every gap between consecutive results in ts (sorted) that ended before end
// to an event: the first that happened during the gap, else the last before it began.
// It returns the longest gap of each event.
func stalls(ts []time.Time, evs []*fault, end time.Time) []stall {
	out := make([]stall, len(evs))
	for i := 1; i < len(ts) && !ts[i].After(end); i++ {
		from, to := ts[i-1], ts[i]
		k := -1
		for j, e := range evs {
			if !e.at.After(from) {
				k = j // the last event before the gap
			} else if !e.at.After(to) {
				k = j // the first event during the gap
				break
			}
		}
		if k < 0 {
			continue
		}
		if g := to.Sub(from); g > out[k].gap {
			out[k] = stall{gap: g, resumed: to.Sub(evs[k].at)}
		}
	}
	return out
}

// buildNATSServer builds the nats-server of go.mod into a temporary directory.
func buildNATSServer(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("TOOLFLEET_NATS_SERVER"); bin != "" { // a machine without Go
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("building nats-server needs the go command in PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "nats-server")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, out)
	}
	return bin
}

// node is one nats-server process of the cluster, restartable on its ports and store.
type node struct {
	name, conf, log string
	port            int
	cmd             *exec.Cmd
	done            chan struct{}
}

type cluster struct {
	bin   string
	nodes []*node
}

func startCluster(t *testing.T, bin string) *cluster { return startNodes(t, bin, 3, nil) }

// startNodes starts a cluster of n nodes; extra, when set, adds to node i's
// configuration (server tags, subject mappings).
func startNodes(t testing.TB, bin string, count int, extra func(i int) string) *cluster {
	t.Helper()
	c := &cluster{bin: bin}
	ports := make([]int, 2*count)
	for i := range ports {
		ports[i] = nettest.FreePort(t)
	}
	var routes []string
	for i := range count {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[count+i]))
	}
	dir := t.TempDir()
	for i := range count {
		n := &node{name: fmt.Sprintf("n%d", i), port: ports[i]}
		store := filepath.Join(dir, n.name)
		n.conf, n.log = filepath.Join(dir, n.name+".conf"), filepath.Join(dir, n.name+".log")
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream { store_dir: %q }
`, n.name, n.port, store)
		if count > 1 { // one node stands alone
			conf += fmt.Sprintf("cluster { name: toolfleet, listen: 127.0.0.1:%d, routes: [%s] }\n", ports[count+i], strings.Join(routes, ", "))
		}
		if extra != nil {
			conf += extra(i)
		}
		if err := os.WriteFile(n.conf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	for i := range c.nodes {
		c.start(t, i)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.cmd != nil {
				_ = n.cmd.Process.Kill()
				<-n.done
			}
		}
	})
	return c
}

// start runs node i and waits until it accepts connections.
func (c *cluster) start(t testing.TB, i int) {
	t.Helper()
	n := c.nodes[i]
	// The server's own output goes to its log (appended across restarts), so that a node
	// that does not come up says why.
	out, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close() // the child holds its own copy
	n.cmd = exec.Command(c.bin, "-c", n.conf)
	n.cmd.Stdout, n.cmd.Stderr = out, out
	n.done = make(chan struct{})
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-n.done:
			t.Fatalf("%s exited before accepting connections (%v); its log ends:\n%s", n.name, n.cmd.ProcessState, n.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not accept connections: %v; its log ends:\n%s", n.name, err, n.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail is the end of n's server log.
func (n *node) logTail() string {
	b, err := os.ReadFile(n.log)
	if err != nil {
		return err.Error()
	}
	return string(b[max(len(b)-2000, 0):])
}

// urls lists every node's address, node first first.
func (c *cluster) urls(first int) string {
	var u []string
	for k := range c.nodes {
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[(first+k)%len(c.nodes)].port))
	}
	return strings.Join(u, ",")
}

// connect connects to the cluster as the parts do (reconnecting forever, 250ms apart).
func (c *cluster) connect(t testing.TB, name string, first int) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.urls(first), nats.Name(name), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// fault is one node stopped: when, and how long until every group it led had a new
// leader.
type fault struct {
	what     string
	at       time.Time
	election time.Duration
}

// stop stops node i (SIGKILL when kill, else SIGTERM) and measures the election: until
// every stream and consumer of the fleet has a leader other than i.
func (c *cluster) stop(t *testing.T, js jetstream.JetStream, i int, what string, kill bool) *fault {
	t.Helper()
	n := c.nodes[i]
	f := &fault{what: what, at: time.Now()}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !c.led(js, n.name) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no new leaders after 60s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.election = time.Since(f.at)
	select {
	case <-n.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: %s still running after 60s", what, n.name)
	}
	n.cmd = nil
	return f
}

// groups are the fleet's streams (with the buckets' streams) and the tools' consumers.
var groups = []string{events.StreamCalls, events.StreamResults, events.StreamEvents, events.StreamDeadLetters,
	"KV_" + events.BucketCatalog, "KV_" + events.BucketInflight, "KV_" + events.BucketApprovals}

// led reports whether every group has a leader, none of them not.
func (c *cluster) led(js jetstream.JetStream, not string) bool {
	ok := func(ci *jetstream.ClusterInfo) bool { return ci != nil && ci.Leader != "" && ci.Leader != not }
	for _, g := range groups {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		s, err := js.Stream(ctx, g)
		cancel()
		if err != nil || !ok(s.CachedInfo().Cluster) {
			return false
		}
	}
	for _, tool := range toolNames {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		cons, err := js.Consumer(ctx, events.StreamCalls, events.ConsumerName(tool))
		cancel()
		if err != nil || !ok(cons.CachedInfo().Cluster) {
			return false
		}
	}
	return true
}

// waitCurrent waits until every group has a leader and two current replicas: a node
// that came back has caught up.
func (c *cluster) waitCurrent(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	current := func(ci *jetstream.ClusterInfo) bool {
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return false
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		all := true
		for _, g := range groups {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s, err := js.Stream(ctx, g)
			cancel()
			all = all && err == nil && current(s.CachedInfo().Cluster)
		}
		for _, tool := range toolNames {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			cons, err := js.Consumer(ctx, events.StreamCalls, events.ConsumerName(tool))
			cancel()
			all = all && err == nil && current(cons.CachedInfo().Cluster)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not catch up within 90s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) streamLeader(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range c.nodes {
		if s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader == n.name {
			return i
		}
	}
	t.Fatalf("stream %s has no leader among the nodes: %+v", stream, s.CachedInfo().Cluster)
	return -1
}

// runCounter counts the runs of each call id, across executors.
type runCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runCounter) add(id string) {
	r.mu.Lock()
	r.n[id]++
	r.mu.Unlock()
}

func (r *runCounter) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

type runningExecutor struct {
	i      int
	ex     *executor.Executor
	cancel context.CancelFunc
	done   chan error
}

// startExecutor runs executor i on its own connection (to node i first), serving an
// idempotent and a non-idempotent tool that count their runs.
func startExecutor(t testing.TB, c *cluster, i int, cfg events.Config, runs *runCounter) *runningExecutor {
	t.Helper()
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	reg := tools.NewRegistry()
	for _, def := range []tools.Definition{
		{Name: toolIdem, Description: "Returns its arguments.", Parameters: schema, Safe: true},
		{Name: toolOnce, Description: "Charges once.", Parameters: schema, Safe: true, Idempotent: new(false)},
	} {
		err := reg.AddFunc(def, func(ctx context.Context, args json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			runs.add(info.CallID)
			return args, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	nc := c.connect(t, fmt.Sprintf("executor-%d", i), i)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Timestamp().Str("executor", fmt.Sprint(i)).Logger()
	ex, err := executor.New(nc, reg, executor.WithStreamConfig(cfg), executor.WithConcurrency(16), executor.WithLogger(log),
		executor.WithExecutorID(fmt.Sprintf("ex%d", i)), executor.WithGracePeriod(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningExecutor{i: i, ex: ex, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- ex.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *runningExecutor) stop(t testing.TB) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("executor %d: %v", r.i, err)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("executor %d did not stop within 60s", r.i)
	}
}

// load publishes calls of every tool at callsPerSecond each, as any NATS client may:
// each call is published until JetStream stores it (its id deduplicates the retries).
type load struct {
	started time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	calls   []call
}

type call struct{ tool, id, run string }

func startLoad(t *testing.T, js jetstream.JetStream) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{started: time.Now(), cancel: cancel}
	for _, tool := range toolNames {
		l.wg.Go(func() {
			tick := time.NewTicker(time.Second / callsPerSecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				c := call{tool: tool, id: fmt.Sprintf("%s-%d", tool, n), run: "load"}
				m, err := events.NewCall(events.CallOptions{Source: "/clustertest", ID: c.id, RunID: c.run},
					events.Call{Tool: tool, Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
				if err != nil {
					t.Error(err)
					return
				}
				for {
					pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
					_, err := js.PublishMsg(pctx, m)
					pcancel()
					if err == nil {
						break
					}
					time.Sleep(50 * time.Millisecond) // an election: the call is published once it is stored
				}
				l.mu.Lock()
				l.calls = append(l.calls, c)
				l.mu.Unlock()
			}
		})
	}
	return l
}

// stop ends the load and returns the calls published.
func (l *load) stop() []call {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// stored is a result as stored in the results stream.
type stored struct {
	res    events.Result
	stored time.Time
}

// waitResults waits until every call has a result, fails if any call has more than one,
// and returns every result with the time it was stored.
func (c *cluster) waitResults(t *testing.T, js jetstream.JetStream, calls []call, timeout time.Duration) []stored {
	t.Helper()
	want := map[string]bool{}
	for _, cl := range calls {
		subj, err := events.ResultSubject("", cl.run, cl.id)
		if err != nil {
			t.Fatal(err)
		}
		want[subj] = true
	}
	deadline := time.Now().Add(timeout)
	var counts map[string]uint64
	var missing int
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := js.Stream(ctx, events.StreamResults)
		if err == nil {
			var info *jetstream.StreamInfo
			info, err = s.Info(ctx, jetstream.WithSubjectFilter(events.AllResults))
			if err == nil {
				counts = info.State.Subjects
			}
		}
		cancel()
		missing = 0
		for subj := range want {
			if counts[subj] == 0 {
				missing++
			}
		}
		if err == nil && missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d calls have no result (last error: %v)", timeout, missing, len(calls), err)
		}
		time.Sleep(time.Second)
	}
	for subj, n := range counts {
		if !want[subj] {
			t.Errorf("a result on %s, which no call asked for", subj)
		} else if n != 1 {
			t.Errorf("%d results on %s; want exactly one", n, subj)
		}
	}

	// Read them all back, with the time each was stored; a read that fails (a leader
	// moving) starts over.
	var out []stored
	var err error
	for range 10 {
		if out, err = readResults(js, len(calls)); err == nil {
			return out
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("read the results: %v", err)
	return nil
}

// readResults reads n results from the start of the results stream.
func readResults(js jetstream.JetStream, n int) ([]stored, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, events.StreamResults, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	var out []stored
	for len(out) < n {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			_, r, err := events.DecodeResult(m)
			if err != nil {
				return nil, fmt.Errorf("result on %s: %w", m.Subject(), err)
			}
			out = append(out, stored{res: r, stored: meta.Timestamp})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %d of %d results", len(out), n)
		}
	}
	return out, nil
}
