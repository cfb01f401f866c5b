package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	tfclient "github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// shippedShards is the number of shards of overlays/sharded (a 3-node cluster).
const shippedShards = 3

func shardedDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "k8s", "overlays", "sharded")
}

// shardedMappings is what overlays/sharded's nats.conf adds to the base's: it must be
// the base's file verbatim (below a comment header) followed by the mapping block that
// events.Config writes for the overlay's number of shards, so the two cannot drift.
func shardedMappings(t *testing.T) string {
	t.Helper()
	sharded := string(readFile(t, filepath.Join(shardedDir(t), "nats.conf")))
	base := string(readFile(t, filepath.Join(repoRoot(t), "deploy", "k8s", "base", "nats", "nats.conf")))
	head, extra, ok := strings.Cut(sharded, base)
	if !ok {
		t.Fatal("overlays/sharded/nats.conf does not contain base/nats/nats.conf verbatim")
	}
	for _, line := range strings.Split(strings.TrimSpace(head), "\n") {
		if !strings.HasPrefix(line, "#") {
			t.Fatalf("overlays/sharded/nats.conf adds %q before the base's config; only comments may go there", line)
		}
	}
	if want := "\n" + (events.Config{Shards: shippedShards}).MappingsConf(); extra != want {
		t.Fatalf("overlays/sharded/nats.conf ends with\n%s\nwant events.Config{Shards: %d}.MappingsConf():\n%s", extra, shippedShards, want)
	}
	return extra
}

// The sharded overlay: its nats.conf parses (as nats-server reads it, with auth.conf
// beside it) into a mapping of toolfleet.call.> to the P shard subjects with weights
// summing to 100, the executor and the planner run with the same P, and KEDA sums the
// lag of every tool's consumer on every shard.
func TestShardedOverlay(t *testing.T) {
	cfg := events.Config{Shards: shippedShards}
	shardedMappings(t)
	setEnv(t, serverEnv(t))
	t.Setenv("POD_NAME", "nats-0")
	dir := t.TempDir()
	for name, src := range map[string]string{
		"nats.conf": filepath.Join(shardedDir(t), "nats.conf"),
		"auth.conf": authConf(t),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), readFile(t, src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	parsed, err := conf.ParseFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("parse overlays/sharded/nats.conf: %v", err)
	}
	mappings, _ := parsed["mappings"].(map[string]any)
	if len(mappings) != 1 {
		t.Fatalf("mappings parsed as %v, want one source, %s", parsed["mappings"], events.AllCalls)
	}
	dests, _ := mappings[events.AllCalls].([]any)
	want := cfg.CallMappings()[0].Destinations
	if len(dests) != shippedShards || len(want) != shippedShards {
		t.Fatalf("%s maps to %d destinations, want %d", events.AllCalls, len(dests), shippedShards)
	}
	total := 0
	for i, d := range dests {
		m, _ := d.(map[string]any)
		w, err := strconv.Atoi(strings.TrimSuffix(fmt.Sprint(m["weight"]), "%"))
		if err != nil || m["destination"] != want[i].Subject || w != int(want[i].Weight) {
			t.Errorf("destination %d: %v, want %s at %d%%", i, m, want[i].Subject, want[i].Weight)
		}
		total += w
	}
	if total != 100 {
		t.Errorf("weights sum to %d%%, want 100%%", total)
	}

	docs := render(t, shardedDir(t))
	for _, w := range []struct{ deployment, container string }{{"executor-builtin", "executor"}, {"planner", "planner"}} {
		d := find(docs, "Deployment", w.deployment)
		found := false
		for _, c := range containers(d) {
			if str(c, "name") == w.container {
				found = true
				if got := env(c)["TOOLFLEET_SHARDS"]; got != strconv.Itoa(shippedShards) {
					t.Errorf("%s: TOOLFLEET_SHARDS=%q, want %d", w.deployment, got, shippedShards)
				}
			}
		}
		if !found {
			t.Errorf("no container %s in %s", w.container, w.deployment)
		}
	}
	so := find(docs, "ScaledObject", "executor-builtin")
	if so == nil {
		t.Fatal("no ScaledObject executor-builtin")
	}
	// One trigger per tool and shard, each named, and the formula their sum.
	perTool := map[string]map[string]bool{}
	var names []string
	for _, tr := range list(so, "spec", "triggers") {
		md := get(tr, "metadata")
		cons := str(md, "consumer")
		if perTool[cons] == nil {
			perTool[cons] = map[string]bool{}
		}
		perTool[cons][str(md, "stream")] = true
		names = append(names, str(tr, "name"))
	}
	for cons, streams := range perTool {
		for _, s := range cfg.CallStreams() {
			if !streams[s] {
				t.Errorf("no trigger reads %s on %s", cons, s)
			}
		}
	}
	if len(names) != len(perTool)*shippedShards {
		t.Errorf("%d triggers for %d consumers on %d shards", len(names), len(perTool), shippedShards)
	}
	if got, want := str(so, "spec", "advanced", "scalingModifiers", "formula"), strings.Join(names, " + "); got != want {
		t.Errorf("scalingModifiers formula %q, want the sum of every trigger, %q", got, want)
	}
	if n, err := strconv.Atoi(str(so, "spec", "advanced", "scalingModifiers", "target")); err != nil || n < 1 {
		t.Errorf("scalingModifiers target %q is not a positive integer", str(so, "spec", "advanced", "scalingModifiers", "target"))
	}
}

// A real server started from the shipped sharded config (the mapping block) and the
// shipped users: the executor user creates the P=3 streams; anonymous calls published by
// the client user to the documented subject land in every shard stream, stored under
// their own subject; an executor under the executor user serves every shard, and each
// result reaches a plain subscriber of toolfleet.result.<run>.<call>. Tenants call as
// themselves and read their own results on the right shard; the server refuses them
// another tenant's calls and results on every shard.
func TestShardedServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an authenticated server with an executor")
	}
	cfg := events.Config{Shards: shippedShards}
	acme, globex := tenantUser{"acme", "admin"}, tenantUser{"globex", "user"}
	s := startTenantServerWith(t, shardedMappings(t), acme, globex)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	exec := s.connect(t, "executor")
	must(t, jsutil.Ensure(ctx, exec.js, cfg))
	exec.noViolations()

	// Calls before any executor runs: they wait in the shards, where the admin looks.
	cl, admin := s.connect(t, "client"), s.connect(t, "admin")
	results, err := cl.nc.SubscribeSync("toolfleet.result.shard-run.*")
	must(t, err)
	const calls = 60
	landed := map[string]int{}
	for i := range calls {
		m, err := events.NewCall(events.CallOptions{Source: "/deploytest", ID: fmt.Sprintf("c%d", i), RunID: "shard-run"},
			events.Call{Tool: "echo", Arguments: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
		must(t, err)
		if m.Subject != "toolfleet.call.echo" {
			t.Fatalf("a call is published to %s, not the documented subject", m.Subject)
		}
		ack, err := cl.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatalf("client publishing call %d: %v", i, err)
		}
		landed[ack.Stream]++
		stream, err := admin.js.Stream(ctx, ack.Stream)
		must(t, err)
		stored, err := stream.GetMsg(ctx, ack.Sequence)
		must(t, err)
		if stored.Subject != "toolfleet.call.echo" {
			t.Errorf("call %d stored on %s as %s, want its own subject", i, ack.Stream, stored.Subject)
		}
	}
	for _, name := range cfg.CallStreams() {
		if landed[name] == 0 { // each shard has a 1/3 chance per call: all 60 missing one is ~1e-10
			t.Errorf("no call of %d landed in %s (landed: %v)", calls, name, landed)
		}
	}
	if len(landed) != shippedShards {
		t.Errorf("calls landed in %v, want the %d shards only", landed, shippedShards)
	}
	cl.noViolations()

	reg := tools.NewRegistry()
	must(t, reg.AddFunc(tools.Definition{Name: "echo", Description: "Returns its arguments.",
		Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		func(_ context.Context, args json.RawMessage) (any, error) { return args, nil }))
	ex, err := executor.New(exec.nc, reg, executor.WithStreamConfig(cfg), executor.WithLogger(zerolog.Nop()))
	must(t, err)
	runPart(t, ex.Run)
	select {
	case <-ex.Ready():
	case <-ctx.Done():
		t.Fatal("the executor never got ready")
	}
	answered := map[string]bool{}
	for len(answered) < calls {
		m, err := results.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("%d of %d results reached the subscriber: %v", len(answered), calls, err)
		}
		_, r, err := events.DecodeResult(events.CoreMsg(m))
		if err != nil || r.Status != events.StatusOK {
			t.Fatalf("result on %s: %+v, %v", m.Subject, r, err)
		}
		if answered[m.Subject] {
			t.Errorf("two results on %s", m.Subject)
		}
		answered[m.Subject] = true
	}
	exec.noViolations()
	cl.noViolations()

	// Tenants: pkg/client finds the shards (stream names) and calls as its identity.
	acmeC, globexC := s.connectTenant(t, acme), s.connectTenant(t, globex)
	for _, tc := range []struct {
		c    *client
		u    tenantUser
		call string
	}{{acmeC, acme, "a1"}, {globexC, globex, "g1"}} {
		fc, err := tfclient.New(tc.c.nc, tfclient.WithIdentity(events.Identity{Tenant: tc.u.tenant, Role: tc.u.role}))
		must(t, err)
		res, err := fc.Call(ctx, tfclient.Request{Tool: "echo", ID: tc.call, RunID: "run-" + tc.u.tenant, Arguments: json.RawMessage(`{}`)})
		if err != nil || res.Status != events.StatusOK || res.Caller.Tenant != tc.u.tenant {
			t.Fatalf("%s calling echo: %+v, %v", tc.u.name(), res, err)
		}
	}
	acmeResult, _ := events.ResultSubject("acme", "run-acme", "a1")
	if err := directGetOf(acmeC, cfg.ResultStream(acmeResult), acmeResult)(ctx); err != nil {
		t.Errorf("acme reading its own result by direct get on %s: %v", cfg.ResultStream(acmeResult), err)
	}
	acmeC.noViolations(refusedCleanup(events.StreamResults))
	globexC.noViolations(refusedCleanup(events.StreamResults))
	for _, stream := range cfg.ResultStreams() {
		globexC.denied("read acme's result on "+stream, "$JS.API.DIRECT.GET."+stream+"."+acmeResult, directGetOf(globexC, stream, acmeResult))
	}
	publish := func(c *client, subject string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			m, err := events.NewCall(events.CallOptions{Source: "/spoof", ID: "spoof-" + subject}, events.Call{Tool: "echo"})
			if err != nil {
				return err
			}
			m.Subject = subject
			_, err = c.js.PublishMsg(ctx, m)
			return err
		}
	}
	// The server checks a mapped publish on the shard subject it maps it to.
	var mapped []string
	for n := range shippedShards {
		mapped = append(mapped, "toolfleet.shard."+strconv.Itoa(n)+".call.echo.acme.admin")
	}
	globexC.deniedOn("call as acme's admin", mapped, publish(globexC, "toolfleet.call.echo.acme.admin"))
	for n := range shippedShards {
		shard := "toolfleet.shard." + strconv.Itoa(n) + "."
		globexC.denied("call as acme's admin on shard "+strconv.Itoa(n), shard+"call.echo.acme.admin", publish(globexC, shard+"call.echo.acme.admin"))
		globexC.denied("call anonymously on shard "+strconv.Itoa(n), shard+"call.echo", publish(globexC, shard+"call.echo"))
		cl.denied("call as acme's admin on shard "+strconv.Itoa(n), shard+"call.echo.acme.admin", publish(cl, shard+"call.echo.acme.admin"))
		globexC.denied("publish a result for acme on shard "+strconv.Itoa(n), shard+"result.run-acme.a1.acme", publish(globexC, shard+"result.run-acme.a1.acme"))
		cl.denied("publish a result on shard "+strconv.Itoa(n), shard+"result.shard-run.c0", publish(cl, shard+"result.shard-run.c0"))
	}
}
