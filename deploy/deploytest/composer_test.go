package deploytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/builtin"
	tfclient "github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
	"github.com/toolfleet/toolfleet/pkg/toolsfile"
)

// cacheBucket is the bucket a tools file's cache uses when it names none.
const cacheBucket = toolsfile.DefaultCacheBucket

// composerExtras is what the composer user may do beyond the plain executor, exactly:
// sub-calls on any tool's subject (any tenant's too, with shards the mapped subject),
// direct gets of their results, cancels of the sub-calls a composite ends without, and
// a core subscription to results.
var composerExtras = struct{ publish, subscribe []string }{
	publish: []string{
		"toolfleet.call.>", "toolfleet.shard.*.call.>",
		"$JS.API.DIRECT.GET.TOOLFLEET_RESULTS.>", "$JS.API.DIRECT.GET.TOOLFLEET_RESULTS_0.>",
		"$JS.API.DIRECT.GET.TOOLFLEET_RESULTS_1.>", "$JS.API.DIRECT.GET.TOOLFLEET_RESULTS_2.>",
		"toolfleet.event.cancel.>",
	},
	subscribe: []string{"toolfleet.result.>"},
}

// COMPOSER repeats EXECUTOR's list (the config format cannot splice one list into
// another): as nats-server parses auth.conf, the composer may do everything the plain
// executor may, plus composerExtras and nothing else, and neither has a deny list. A
// line added to EXECUTOR and forgotten in COMPOSER fails here.
func TestComposerIsExecutorPlusSubCalls(t *testing.T) {
	setEnv(t, serverEnv(t))
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(filepath.Join(dir, "auth.conf"), readFile(t, authConf(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("include ./auth.conf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("load auth.conf: %v", err)
	}
	perms := map[string]*server.Permissions{}
	for _, u := range opts.Users {
		perms[u.Username] = u.Permissions
	}
	ex, co := perms["executor"], perms["composer"]
	if ex == nil || co == nil || ex.Publish == nil || co.Publish == nil || ex.Subscribe == nil || co.Subscribe == nil {
		t.Fatalf("executor %+v, composer %+v: want both with publish and subscribe permissions", ex, co)
	}
	check := func(what string, exec, comp, extras []string) {
		t.Helper()
		for _, s := range exec {
			if !slices.Contains(comp, s) {
				t.Errorf("%s: composer lacks %q, which executor has", what, s)
			}
		}
		for _, s := range comp {
			if !slices.Contains(exec, s) && !slices.Contains(extras, s) {
				t.Errorf("%s: composer has %q, neither executor's nor a sub-call's", what, s)
			}
		}
		for _, s := range extras {
			if !slices.Contains(comp, s) {
				t.Errorf("%s: composer lacks %q, which sub-calls need", what, s)
			}
			if slices.Contains(exec, s) {
				t.Errorf("%s: the plain executor has %q, which only the composer needs", what, s)
			}
		}
	}
	check("publish", ex.Publish.Allow, co.Publish.Allow, composerExtras.publish)
	check("subscribe", ex.Subscribe.Allow, co.Subscribe.Allow, composerExtras.subscribe)
	for user, p := range map[string]*server.Permissions{"executor": ex, "composer": co} {
		if len(p.Publish.Deny) > 0 || len(p.Subscribe.Deny) > 0 || p.Response != nil {
			t.Errorf("%s: deny lists or allow_responses %+v: the two users differ only by allows", user, p)
		}
	}
}

// The composer user does what a composite and a tools file's callbacks need, as the code
// does it: a sub-call on a tenant's subject through pkg/client (stored result looked up
// first, then the call, then its result), the cache bucket (created as a cache creates
// it, an entry with its own TTL, read back) and a request to a callback service under
// callbacks.*. The plain executor has the cache and the callbacks too. Then what neither
// may do is refused by the server, subject by subject, and the plain executor still
// makes no call.
func TestComposerUser(t *testing.T) {
	srv := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := events.DefaultConfig()

	plain := srv.connect(t, "executor")
	if err := jsutil.Ensure(ctx, plain.js, cfg); err != nil {
		t.Fatalf("executor: jsutil.Ensure: %v", err)
	}
	reg := tools.NewRegistry()
	if err := builtin.Register(reg, builtin.Config{Enable: []string{"calculator"}}); err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(plain.nc, reg, executor.WithStreamConfig(cfg), executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, ex.Run)
	<-ex.Ready()

	// An operator's callback service (served here by admin; docs/deployment.md says
	// which user to give it).
	admin := srv.connect(t, "admin")
	var asked atomic.Int32
	if _, err := admin.nc.Subscribe("callbacks.audit", func(m *nats.Msg) {
		asked.Add(1)
		_ = m.Respond([]byte(`{"action":"keep"}`))
	}); err != nil {
		t.Fatal(err)
	}
	must(t, admin.nc.Flush())

	composer := srv.connect(t, "composer")
	acme := events.Identity{Tenant: "acme", Role: "admin"}
	sub, err := tfclient.New(composer.nc, tfclient.WithShards(1), tfclient.WithIdentity(acme))
	if err != nil {
		t.Fatal(err)
	}
	// Not a fresh id: the client looks the stored result up before it publishes, as a
	// composite's sub-call does.
	res, err := sub.Call(ctx, tfclient.Request{Tool: "calculator", ID: toolsfile.SubCallID("sum-1", 0), RunID: "run-c",
		Arguments: json.RawMessage(`{"expression":"6*7"}`)})
	if err != nil || !strings.Contains(string(res.Output), "42") {
		t.Fatalf("composer: a sub-call on acme's subject: %s %v", res.Output, err)
	}
	// Asked again (a retried composite), the stored result answers.
	again, err := sub.Call(ctx, tfclient.Request{Tool: "calculator", ID: toolsfile.SubCallID("sum-1", 0), RunID: "run-c"})
	if err != nil || string(again.Output) != string(res.Output) {
		t.Fatalf("composer: the stored result of a sub-call: %s %v", again.Output, err)
	}

	for _, c := range []*client{plain, composer} {
		kv, err := c.js.KeyValue(ctx, cacheBucket)
		if err != nil {
			kv, err = c.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cacheBucket, History: 1, LimitMarkerTTL: time.Minute})
		}
		if err != nil {
			t.Fatalf("%s: open or create the cache bucket: %v", c.user, err)
		}
		key := "lookup." + c.user
		if _, err := kv.Create(ctx, key, []byte(`{"answer":42}`), jetstream.KeyTTL(10*time.Minute)); err != nil {
			t.Fatalf("%s: store a cache entry with a TTL: %v", c.user, err)
		}
		if e, err := kv.Get(ctx, key); err != nil || string(e.Value()) != `{"answer":42}` {
			t.Fatalf("%s: read a cache entry: %v", c.user, err)
		}
		if r, err := c.nc.Request("callbacks.audit", []byte(`{"hook":"onSuccess"}`), 5*time.Second); err != nil || string(r.Data) != `{"action":"keep"}` {
			t.Fatalf("%s: ask a callback service: %v", c.user, err)
		}
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("the callback service was asked %d times, want 2", n)
	}
	plain.noViolations()
	composer.noViolations()

	t.Run("composer", func(t *testing.T) {
		composer.t = t
		denyCommon(t, composer)
		composer.denied("read results through a consumer", "$JS.API.CONSUMER.CREATE."+events.StreamResults+".spy.toolfleet.result.>", func(ctx context.Context) error {
			_, err := composer.js.CreateConsumer(ctx, events.StreamResults, jetstream.ConsumerConfig{Name: "spy", FilterSubject: events.AllResults})
			return err
		})
		composer.denied("publish a plan step", "toolfleet.plan.run1", func(ctx context.Context) error {
			_, err := composer.js.Publish(ctx, "toolfleet.plan.run1", []byte(`{}`))
			return err
		})
	})
	t.Run("executor", func(t *testing.T) {
		plain.t = t
		denyCommon(t, plain)
		claim, err := events.NewCall(events.CallOptions{Source: "/x", ID: "call-x", Caller: acme}, events.Call{Tool: "calculator", Arguments: json.RawMessage(`{}`)})
		must(t, err)
		plain.denied("publish a call on a tenant's subject", claim.Subject, func(ctx context.Context) error {
			_, err := plain.js.PublishMsg(ctx, claim)
			return err
		})
		plain.denied("publish an anonymous call", "toolfleet.call.calculator", func(ctx context.Context) error {
			_, err := plain.js.Publish(ctx, "toolfleet.call.calculator", []byte(`{}`))
			return err
		})
		plain.denied("hear results", "toolfleet.result.>", func(context.Context) error {
			if _, err := plain.nc.SubscribeSync("toolfleet.result.>"); err != nil {
				return err
			}
			return errRefusedLater
		})
	})
}

// denyCommon tries, as c (the executor or the composer user), what neither may do.
func denyCommon(t *testing.T, c *client) {
	t.Helper()
	runState := "$JS.API.DIRECT.GET.KV_" + bucketRuns + ".$KV." + bucketRuns + ".run1"
	for _, r := range []apiRequest{
		{"open the run state bucket", "$JS.API.STREAM.INFO.KV_" + bucketRuns, ""},
		{"read a run's state", runState, ""},
		{"purge the cache bucket", "$JS.API.STREAM.PURGE.KV_" + cacheBucket, ""},
		{"delete the cache bucket", "$JS.API.STREAM.DELETE.KV_" + cacheBucket, ""},
		{"delete the results stream", "$JS.API.STREAM.DELETE." + events.StreamResults, ""},
		{"purge the calls stream", "$JS.API.STREAM.PURGE." + events.StreamCalls, ""},
		{"create a bucket of another name", "$JS.API.STREAM.CREATE.KV_other-cache", `{"name":"KV_other-cache","subjects":["$KV.other-cache.>"]}`},
		{"ask a service outside callbacks.* and hooks.*", "audit.service", `{}`},
	} {
		c.denied(r.what, r.subject, func(ctx context.Context) error {
			_, err := c.nc.RequestWithContext(ctx, r.subject, []byte(r.body))
			return err
		})
	}
	doneSubj, _ := events.RunEventSubject("", "run1", "done")
	ans, _ := events.ApprovalAnsweredSubject(events.Identity{}, "calculator", "call3")
	for what, subject := range map[string]string{
		"announce the end of a run": doneSubj,
		"answer an approval":        ans,
		"write run state":           "$KV." + bucketRuns + ".run1",
		"write another bucket":      "$KV.other-cache.k",
	} {
		c.denied(what, subject, func(ctx context.Context) error {
			_, err := c.js.Publish(ctx, subject, []byte(`{}`))
			return err
		})
	}
	for _, subject := range []string{"toolfleet.call.>", "callbacks.>"} {
		c.denied("subscribe to "+subject, subject, func(context.Context) error {
			if _, err := c.nc.SubscribeSync(subject); err != nil {
				return err
			}
			return errRefusedLater
		})
	}
}

// composerFile is a tools file with a composite over built-ins and hold (which waits
// for an approval) served by another executor, and a command tool with a cache and a
// service callback.
const composerFile = `
tools:
  - name: sums
    description: Computes, then echoes.
    safe: true
    timeout: TIMEOUT
    composite: {tools: [calculator, echo, hold]}
  - name: lookup
    description: Looks a word up.
    safe: true
    parameters: {type: object, properties: {q: {type: string}}}
    command: {argv: [sh, -c, 'cat >/dev/null; echo run >> RAN; echo ''{"answer":42}''']}
    callbacks:
      beforeCall: {cache: {key: [/q], ttl: 10m}}
      onSuccess: {service: callbacks.audit}
`

// A real executor serving a tools file with a composite and a cached, audited tool,
// logged in as composer, serves them for a tenant's user against the permissioned
// server: the composite's sub-calls run on the plain executor under the tenant's
// identity, a composite call canceled while its sub-call waits for an approval cancels
// that sub-call as the tenant (the composer publishes the cancel), the cache answers the
// second lookup (the tool ran once), the callback service is asked, and the server
// refuses the composer nothing. The same file served
// under the plain executor user: the composite fails, refused the sub-call on the
// tenant's subject, which is why composites need the composer user.
func TestComposerServesCompositesAndCallbacks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two executors against an authenticated server")
	}
	acme := tenantUser{"acme", "admin"}
	t.Run("composer", func(t *testing.T) { testComposer(t, startTenantServer(t, acme), acme, events.DefaultConfig()) })
	t.Run("composer, overlays/sharded", func(t *testing.T) {
		cfg := events.DefaultConfig()
		cfg.Shards = shippedShards
		testComposer(t, startTenantServerWith(t, shardedMappings(t), acme), acme, cfg)
	})
	t.Run("plain executor", func(t *testing.T) {
		srv := startTenantServer(t, acme)
		f := serveComposerFile(t, srv, "executor", "1s", events.DefaultConfig())
		tenant := srv.connectTenant(t, acme)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl, err := tfclient.New(tenant.nc, tfclient.WithIdentity(events.Identity{Tenant: acme.tenant, Role: acme.role}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := cl.Call(ctx, tfclient.Request{Tool: "sums", ID: "sums-2", RunID: "run-p",
			Arguments: json.RawMessage(`{"calls":[{"name":"calculator","args":{"expression":"1+1"}}]}`)})
		if err == nil || res.Status == events.StatusOK {
			t.Fatalf("sums under the plain executor user answered %s, want a failure", res.Output)
		}
		// The first thing refused is the sub-call's result: its look-up (a direct get
		// of the result subject) and the subscription that awaits it. The look-up goes
		// unanswered, so the composite ends on its timeout.
		resultSubj, err := events.ResultSubject(acme.tenant, "run-p", toolsfile.SubCallID("sums-2", 0))
		must(t, err)
		f.exec.mu.Lock()
		refused := slices.ContainsFunc(f.exec.violations, func(v string) bool { return strings.Contains(v, resultSubj+`"`) })
		f.exec.mu.Unlock()
		if !refused {
			t.Errorf("the composite failed (%s), but the server reported no refusal of its sub-call's result %s (violations: %v)", res.Output, resultSubj, f.exec.violations)
		}
		// The cache and the callback work under the plain user.
		if res, err := cl.Call(ctx, tfclient.Request{Tool: "lookup", Arguments: json.RawMessage(`{"q":"w"}`)}); err != nil || string(res.Output) != `{"answer":42}` {
			t.Fatalf("lookup under the plain executor user: %s %v", res.Output, err)
		}
		if n := f.audited.Load(); n != 1 {
			t.Errorf("the onSuccess service was asked %d times, want once", n)
		}
	})
}

// testComposer serves composerFile as composer on srv, with cfg's shards, and calls it as
// tenant u.
func testComposer(t *testing.T, srv *authServer, u tenantUser, cfg events.Config) {
	f := serveComposerFile(t, srv, "composer", "20s", cfg)
	tenant := srv.connectTenant(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := tfclient.New(tenant.nc, tfclient.WithIdentity(events.Identity{Tenant: u.tenant, Role: u.role}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.Call(ctx, tfclient.Request{Tool: "sums", ID: "sums-1", RunID: "run-s",
		Arguments: json.RawMessage(`{"calls":[{"name":"calculator","args":{"expression":"6*7"}},{"name":"echo","args":{"value":"hi"}}]}`)})
	if err != nil {
		t.Fatalf("sums: %v (%s)", err, res.Output)
	}
	var out struct {
		Results []struct {
			Name   string          `json:"name"`
			Result json.RawMessage `json:"result"`
		} `json:"results"`
	}
	if err := json.Unmarshal(res.Output, &out); err != nil || len(out.Results) != 2 ||
		!strings.Contains(string(out.Results[0].Result), "42") || !strings.Contains(string(out.Results[1].Result), "hi") {
		t.Fatalf("sums answered %s (%v), want the calculator's 42 and the echo", res.Output, err)
	}
	// Each sub-call ran as the tenant's call, answered by the plain executor, its
	// result stored under the tenant (read with the tenant's own permissions).
	stored, found, err := cl.StoredResult(ctx, "run-s", toolsfile.SubCallID("sums-1", 0))
	if err != nil || !found || stored.Executor != "plain" || stored.Tool != "calculator" {
		t.Errorf("the first sub-call's stored result %+v (found %v, %v), want calculator's by the plain executor", stored, found, err)
	}

	// Canceled while its sub-call of hold waits for an approval, the composite cancels
	// the sub-call: it is answered canceled, by the tenant's identity.
	approvals, err := cl.WatchApprovals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer approvals.Stop()
	if _, err := cl.Submit(ctx, tfclient.Request{Tool: "sums", ID: "sums-3", RunID: "run-s",
		Arguments: json.RawMessage(`{"calls":[{"name":"hold","args":{}}]}`)}, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	held := toolsfile.SubCallID("sums-3", 0)
	if _, req, err := approvals.Next(); err != nil || req.CallID != held {
		t.Fatalf("the approval request %+v (%v), want the sub-call %s's", req, err, held)
	}
	if res, err := cl.CancelAndWait(ctx, "sums", "run-s", "sums-3"); err != nil || res.Status != events.StatusCanceled {
		t.Fatalf("cancel sums: %+v (%v)", res, err)
	}
	natstest.Eventually(t, 20*time.Second, "the held sub-call's result", func() bool {
		stored, found, err = cl.StoredResult(ctx, "run-s", held)
		return err == nil && found
	})
	if stored.Status != events.StatusCanceled || stored.Error == nil || !strings.Contains(stored.Error.Message, "canceled by "+u.tenant+"/"+u.role) {
		t.Errorf("the sub-call its composite ended without: %s %+v, want canceled by the tenant", stored.Status, stored.Error)
	}

	for i := range 2 {
		res, err := cl.Call(ctx, tfclient.Request{Tool: "lookup", Arguments: json.RawMessage(`{"q":"word"}`)})
		if err != nil || string(res.Output) != `{"answer":42}` {
			t.Fatalf("lookup %d: %s %v", i, res.Output, err)
		}
	}
	if n := f.ran(t); n != 1 {
		t.Errorf("lookup ran %d times for two calls of one key, want once (the cache answers the second)", n)
	}
	if n := f.audited.Load(); n != 1 {
		t.Errorf("the onSuccess service was asked %d times, want once (a cache hit skips it)", n)
	}
	f.exec.noViolations()
	tenant.noViolations()
}

// composerFixture is composerFile served on a server.
type composerFixture struct {
	exec    *client // the file's executor's connection
	ranLog  string
	audited atomic.Int32
}

func (f *composerFixture) ran(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(f.ranLog)
	if err != nil {
		t.Fatalf("lookup never ran: %v", err)
	}
	return strings.Count(string(b), "\n")
}

// serveComposerFile starts, on srv, the plain executor with the built-ins calculator and
// echo and hold, an unsafe tool (id "plain"), the callback service callbacks.audit, and an executor of
// composerFile, with the composite's timeout, logged in as user (id "file"), all with
// cfg's shards.
func serveComposerFile(t *testing.T, srv *authServer, user, timeout string, cfg events.Config) *composerFixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := &composerFixture{ranLog: filepath.Join(t.TempDir(), "ran.log")}

	plain := srv.connect(t, "executor")
	builtins := tools.NewRegistry()
	if err := builtin.Register(builtins, builtin.Config{Enable: []string{"calculator", "echo"}}); err != nil {
		t.Fatal(err)
	}
	if err := builtins.AddFunc(tools.Definition{Name: "hold", Description: "Waits for an approval.", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return "held", nil }); err != nil {
		t.Fatal(err)
	}
	pe, err := executor.New(plain.nc, builtins, executor.WithStreamConfig(cfg), executor.WithExecutorID("plain"), executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, pe.Run)
	<-pe.Ready()

	admin := srv.connect(t, "admin")
	if _, err := admin.nc.Subscribe("callbacks.audit", func(m *nats.Msg) {
		f.audited.Add(1)
		_ = m.Respond([]byte(`{"action":"keep"}`))
	}); err != nil {
		t.Fatal(err)
	}
	must(t, admin.nc.Flush())

	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(strings.NewReplacer("RAN", f.ranLog, "TIMEOUT", timeout).Replace(composerFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := toolsfile.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	servers, err := file.Start(ctx, reg, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(servers.Close)
	f.exec = srv.connect(t, user)
	fe, err := executor.New(f.exec.nc, reg, executor.WithStreamConfig(cfg), executor.WithExecutorID("file"), executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, fe.Run)
	<-fe.Ready()
	natstest.Eventually(t, 10*time.Second, "every tool in the catalog", func() bool {
		cat, err := jsutil.OpenCatalog(ctx, admin.js, cfg)
		if err != nil {
			return false
		}
		defs, err := cat.List(ctx)
		return err == nil && len(defs) == 5
	})
	return f
}
