package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	tfclient "github.com/toolfleet/toolfleet/pkg/client"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/executor"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// tenantUser is one instance of deploy/k8s/base/nats/tenant-user.conf.tmpl.
type tenantUser struct{ tenant, role string }

func (u tenantUser) name() string     { return u.tenant + "-" + u.role }
func (u tenantUser) password() string { return u.name() + "-secret" }
func (u tenantUser) hashVar() string {
	return "TOOLFLEET_" + strings.ToUpper(u.tenant+"_"+u.role) + "_PASSWORD_BCRYPT"
}

// startTenantServer is startAuthServer with the tenants' users made from the shipped
// template, put where auth.conf says they go.
func startTenantServer(t *testing.T, users ...tenantUser) *authServer {
	t.Helper()
	return startTenantServerWith(t, "", users...)
}

// startTenantServerWith is startTenantServer with extra appended to the server's config
// (after the users), as a deployment's nats.conf adds to auth.conf.
func startTenantServerWith(t *testing.T, extra string, users ...tenantUser) *authServer {
	t.Helper()
	setEnv(t, serverEnv(t))
	dir := filepath.Join(repoRoot(t), "deploy", "k8s", "base", "nats")
	tmpl, err := os.ReadFile(filepath.Join(dir, "tenant-user.conf.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	auth, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var entries strings.Builder
	for _, u := range users {
		entries.WriteString(strings.NewReplacer("<tenant>", u.tenant, "<role>", u.role, "<PASSWORD_VAR>", u.hashVar()).Replace(string(tmpl)))
		entries.WriteString("\n")
		h, err := bcrypt.GenerateFromPassword([]byte(u.password()), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(u.hashVar(), string(h))
	}
	const marker = "    # TENANT USERS\n"
	if !strings.Contains(string(auth), marker) {
		t.Fatalf("auth.conf has no %q line for the tenants' users", strings.TrimSpace(marker))
	}
	conf := strings.Replace(string(auth), marker, entries.String(), 1)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "auth.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	main := "listen: 127.0.0.1:-1\njetstream { store_dir: " + quote(filepath.Join(work, "js")) + " }\ninclude ./auth.conf\n" + extra
	if err := os.WriteFile(filepath.Join(work, "nats.conf"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(work, "nats.conf"))
	if err != nil {
		t.Fatalf("load nats config with the tenants' users: %v", err)
	}
	return &authServer{srv: startServer(t, opts)}
}

// connectTenant logs in as u's user with its own inbox prefix, as the template says.
func (s *authServer) connectTenant(t *testing.T, u tenantUser) *client {
	t.Helper()
	c := &client{t: t, user: u.name()}
	nc, err := nats.Connect(s.srv.ClientURL(), nats.UserInfo(u.name(), u.password()), nats.Name(u.name()),
		nats.CustomInboxPrefix("_INBOX_"+u.tenant),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				c.mu.Lock()
				c.violations = append(c.violations, err.Error())
				c.mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", u.name(), err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// Two tenants, each with a least-privilege user made from the shipped template, on a
// real server with the real executor: the identity a call runs with is the one its
// user may publish, and nothing a tenant can send reaches the other's calls, results,
// approvals or run events — checked subject by subject, each refusal being the server's.
// A tool restricted to a role is refused (forbidden, never run) to the other role, and
// to an anonymous client that claims the role in its metadata.
func TestTenantUsers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an authenticated server with an executor")
	}
	acmeAdmin, globexUser := tenantUser{"acme", "admin"}, tenantUser{"globex", "user"}
	s := startTenantServer(t, acmeAdmin, globexUser)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := events.Config{}

	ran := map[string]int{}
	reg := tools.NewRegistry()
	var mu sync.Mutex
	must(t, reg.AddFunc(tools.Definition{Name: "admin_report", Description: "A report only admins may run.",
		Parameters: json.RawMessage(`{"type":"object"}`), Safe: true, Roles: []string{"admin"}},
		func(ctx context.Context, _ json.RawMessage) (any, error) {
			info, _ := tools.CallInfoFrom(ctx)
			mu.Lock()
			ran[info.Tenant+"/"+info.Role]++
			mu.Unlock()
			return map[string]string{"tenant": info.Tenant, "role": info.Role}, nil
		}))
	must(t, reg.AddFunc(tools.Definition{Name: "big_report", Description: "An output too large for a result.",
		Parameters: json.RawMessage(`{"type":"object"}`), Safe: true},
		func(context.Context, json.RawMessage) (any, error) { return strings.Repeat("r", 600_000), nil }))
	must(t, reg.AddFunc(tools.Definition{Name: "wipe", Description: "Unsafe: needs an approval.",
		Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (any, error) { return "wiped", nil }))
	exec := s.connect(t, "executor")
	ex, err := executor.New(exec.nc, reg, executor.WithStreamConfig(cfg), executor.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runPart(t, ex.Run)
	select {
	case <-ex.Ready():
	case <-ctx.Done():
		t.Fatal("the executor never got ready")
	}

	acme, globex := s.connectTenant(t, acmeAdmin), s.connectTenant(t, globexUser)
	acmeClient, err := tfclient.New(acme.nc, tfclient.WithIdentity(events.Identity{Tenant: "acme", Role: "admin"}))
	must(t, err)
	globexClient, err := tfclient.New(globex.nc, tfclient.WithIdentity(events.Identity{Tenant: "globex", Role: "user"}))
	must(t, err)

	// Allowed: acme's admin runs the admin tool and reads its result; the tool saw the
	// identity of the subject.
	res, err := acmeClient.Call(ctx, tfclient.Request{Tool: "admin_report", ID: "a1", RunID: "run-a"})
	if err != nil || res.Status != events.StatusOK || res.Caller != (events.Identity{Tenant: "acme", Role: "admin"}) {
		t.Fatalf("acme admin calling admin_report: %+v, %v", res, err)
	}
	// Refused by the executor: globex's user has role "user".
	res, err = globexClient.Call(ctx, tfclient.Request{Tool: "admin_report", ID: "g1", RunID: "run-g"})
	if !errors.Is(err, tools.ErrForbidden) || res.Status != events.StatusForbidden || res.Attempts != 0 {
		t.Fatalf("globex user calling admin_report: %+v, %v; want forbidden, never run", res, err)
	}
	// Refused by the executor: an anonymous client claiming the role in metadata.
	anon, err := tfclient.New(s.connect(t, "client").nc)
	must(t, err)
	res, err = anon.Call(ctx, tfclient.Request{Tool: "admin_report", ID: "n1", Metadata: map[string]string{"role": "admin", "tenant": "acme"}})
	if !errors.Is(err, tools.ErrForbidden) {
		t.Fatalf("anonymous call claiming role admin in metadata: %+v, %v; want forbidden", res, err)
	}
	mu.Lock()
	runs := fmt.Sprint(ran)
	mu.Unlock()
	if runs != "map[acme/admin:1]" {
		t.Fatalf("admin_report ran %s; want once, for acme/admin", runs)
	}
	acme.noViolations(refusedCleanup(events.StreamResults))
	globex.noViolations(refusedCleanup(events.StreamResults))

	// Refused by the server: claiming another identity, or none.
	call := func(c *client, subject string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			m, err := events.NewCall(events.CallOptions{Source: "/spoof", ID: "spoof-" + subject}, events.Call{Tool: "admin_report"})
			if err != nil {
				return err
			}
			m.Subject = subject
			_, err = c.js.PublishMsg(ctx, m)
			return err
		}
	}
	globex.denied("call as acme's admin", "toolfleet.call.admin_report.acme.admin", call(globex, "toolfleet.call.admin_report.acme.admin"))
	globex.denied("call as its own tenant's admin", "toolfleet.call.admin_report.globex.admin", call(globex, "toolfleet.call.admin_report.globex.admin"))
	globex.denied("call anonymously", "toolfleet.call.admin_report", call(globex, "toolfleet.call.admin_report"))
	acme.denied("call as globex's user", "toolfleet.call.echo.globex.user", call(acme, "toolfleet.call.echo.globex.user"))

	// Results: each reads its own; the other's is refused, by direct get and by consumer.
	acmeResult, _ := events.ResultSubject("acme", "run-a", "a1")
	globexResult, _ := events.ResultSubject("globex", "run-g", "g1")
	directGet := func(c *client, subject string) func(ctx context.Context) error {
		return directGetOf(c, events.StreamResults, subject)
	}
	if err := directGet(globex, globexResult)(ctx); err != nil {
		t.Errorf("globex reading its own result by direct get: %v", err)
	}
	globex.denied("read acme's result by direct get", "$JS.API.DIRECT.GET."+events.StreamResults+"."+acmeResult, directGet(globex, acmeResult))
	acme.denied("read globex's result by direct get", "$JS.API.DIRECT.GET."+events.StreamResults+"."+globexResult, directGet(acme, globexResult))
	consume := func(c *client, stream, filter string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Name: "spy", FilterSubject: filter, AckPolicy: jetstream.AckNonePolicy})
			return err
		}
	}
	for _, f := range []string{"toolfleet.result.>", "toolfleet.result.*.*.acme", "toolfleet.result.*.*.*", "toolfleet.result.run-a.*"} {
		globex.denied("read results through a consumer on "+f, "$JS.API.CONSUMER.CREATE."+events.StreamResults+".spy."+f, consume(globex, events.StreamResults, f))
	}
	for _, f := range []string{"toolfleet.event.>", "toolfleet.event.run.*.*.acme", "toolfleet.event.approval.requested.*.*.acme", "toolfleet.event.approval.answered.>"} {
		globex.denied("read events through a consumer on "+f, "$JS.API.CONSUMER.CREATE."+events.StreamEvents+".spy."+f, consume(globex, events.StreamEvents, f))
	}
	globex.denied("listen to another user's inbox", "_INBOX.>", func(ctx context.Context) error {
		sub, err := globex.nc.SubscribeSync("_INBOX.>")
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		_, err = sub.NextMsgWithContext(ctx) // the refusal arrives asynchronously
		return err
	})

	// An output stored by reference: acme reads its chunks, globex cannot.
	big, err := acmeClient.Call(ctx, tfclient.Request{Tool: "big_report", ID: "b1", RunID: "run-a"})
	if err != nil || big.OutputRef == nil || len(big.Output) != 600_002 {
		t.Fatalf("acme's large output: ref %+v, %d bytes, %v; want it read by reference", big.OutputRef, len(big.Output), err)
	}
	chunk, _ := events.PayloadSubject("acme", big.OutputRef.ID, 0)
	globex.denied("read acme's payload", "$JS.API.DIRECT.GET."+events.StreamPayloads+"."+chunk, directGetOf(globex, events.StreamPayloads, chunk))
	// Large arguments go by reference: acme stores their chunks, the executor reads them;
	// globex cannot write a chunk on acme's subjects.
	pad, _ := json.Marshal(map[string]string{"pad": strings.Repeat("p", 600_000)})
	if r, err := acmeClient.Call(ctx, tfclient.Request{Tool: "big_report", ID: "b2", RunID: "run-a", Arguments: pad}); err != nil || r.Status != events.StatusOK {
		t.Fatalf("acme's call with large arguments: %+v, %v", r, err)
	}
	globex.denied("write a chunk of acme's payload", chunk, func(ctx context.Context) error {
		_, err := globex.js.Publish(ctx, chunk, []byte("forged"))
		return err
	})
	acme.noViolations(refusedCleanup(events.StreamResults))

	// Approvals: acme's call of the unsafe tool waits; globex can neither see the request
	// nor answer it, acme can do both, and the tool ran once, approved.
	acmeApprovals, err := acmeClient.WatchApprovals(ctx)
	must(t, err)
	defer acmeApprovals.Stop()
	done := make(chan events.Result, 1)
	go func() {
		r, _ := acmeClient.Call(ctx, tfclient.Request{Tool: "wipe", ID: "w1", RunID: "run-a"})
		done <- r
	}()
	_, req, err := acmeApprovals.Next()
	if err != nil || req.CallID != "w1" || req.Caller.Tenant != "acme" {
		t.Fatalf("acme's approval request: %+v, %v", req, err)
	}
	acmeAdminID := events.Identity{Tenant: "acme", Role: "admin"}
	ans, _ := events.ApprovalAnsweredSubject(acmeAdminID, "wipe", "w1")
	globex.denied("answer acme's approval", ans, func(ctx context.Context) error {
		m, err := events.NewApprovalAnswer("/spoof", acmeAdminID, "wipe", "w1", events.ApprovalAnswer{Decision: events.DecisionDeny})
		if err != nil {
			return err
		}
		_, err = globex.js.PublishMsg(ctx, m)
		return err
	})
	// An answer names its answerer's role, and a user answers only as its own role: the
	// executors hear an answer from a role that may call the tool, and no user can claim
	// one.
	acmeUser := events.Identity{Tenant: "acme", Role: "user"}
	asUser, _ := events.ApprovalAnsweredSubject(acmeUser, "wipe", "w1")
	acme.denied("answer acme's approval as another role", asUser, func(ctx context.Context) error {
		m, err := events.NewApprovalAnswer("/spoof", acmeUser, "wipe", "w1", events.ApprovalAnswer{Decision: events.DecisionDeny})
		if err != nil {
			return err
		}
		_, err = acme.js.PublishMsg(ctx, m)
		return err
	})
	asTenant := "toolfleet.event.approval.answered.wipe.w1.acme"
	acme.denied("answer acme's approval without a role", asTenant, func(ctx context.Context) error {
		_, err := acme.js.Publish(ctx, asTenant, []byte(`{"decision":"deny"}`))
		return err
	})
	// Run cancels likewise: as the user's own tenant and role only.
	ownCancel, _ := events.RunCancelSubject(acmeAdminID, "r1")
	otherCancel, _ := events.RunCancelSubject(acmeUser, "r1")
	acme.denied("cancel a run as another role", otherCancel, func(ctx context.Context) error {
		_, err := acme.nc.RequestWithContext(ctx, otherCancel, nil)
		return err
	})
	if err := acme.nc.Publish(ownCancel, nil); err != nil {
		t.Errorf("acme publishing a run cancel as itself: %v", err)
	}
	// Cancels: each user may cancel as its own tenant and role only.
	acmeCancel, _ := events.CancelSubject(acmeAdminID, "wipe", "w9")
	globex.denied("cancel acme's call", acmeCancel, func(ctx context.Context) error {
		m, err := events.NewCancel("/spoof", acmeAdminID, "wipe", "w9", events.Cancel{})
		if err != nil {
			return err
		}
		_, err = globex.js.PublishMsg(ctx, m)
		return err
	})
	globex.denied("cancel an anonymous call", "toolfleet.event.cancel.wipe.w9", func(ctx context.Context) error {
		m, err := events.NewCancel("/spoof", events.Identity{}, "wipe", "w9", events.Cancel{})
		if err != nil {
			return err
		}
		_, err = globex.js.PublishMsg(ctx, m)
		return err
	})
	asUserCancel, _ := events.CancelSubject(acmeUser, "wipe", "w9")
	acme.denied("cancel as another role", asUserCancel, func(ctx context.Context) error {
		m, err := events.NewCancel("/spoof", acmeUser, "wipe", "w9", events.Cancel{})
		if err != nil {
			return err
		}
		_, err = acme.js.PublishMsg(ctx, m)
		return err
	})
	acme.denied("cancel without a role (the shape before roles)", "toolfleet.event.cancel.wipe.w9.acme", func(ctx context.Context) error {
		_, err := acme.js.Publish(ctx, "toolfleet.event.cancel.wipe.w9.acme", []byte(`{}`))
		return err
	})
	if m, err := events.NewCancel("/acme", acmeAdminID, "wipe", "w9", events.Cancel{}); err != nil {
		t.Fatal(err)
	} else if _, err := acme.js.PublishMsg(ctx, m); err != nil {
		t.Errorf("acme cancelling its own call: %v", err)
	}
	// An answer on globex's own subject for the same call id answers nothing of acme's.
	if err := globexClient.Answer(ctx, "wipe", "w1", events.ApprovalAnswer{Decision: events.DecisionDeny, By: "mallory"}); err != nil {
		t.Fatalf("globex answering on its own subject: %v", err)
	}
	must(t, acmeClient.Answer(ctx, "wipe", "w1", events.ApprovalAnswer{Decision: events.DecisionApprove, By: "alice"}))
	select {
	case r := <-done:
		if r.Status != events.StatusOK || r.Approval == nil || r.Approval.By != "acme/admin" || r.Approval.ClaimedBy != "alice" {
			t.Fatalf("acme's approved call: %+v (approval %+v); want ok, approved by acme/admin (claimed: alice)", r, r.Approval)
		}
	case <-ctx.Done():
		t.Fatal("acme's approved call never answered")
	}
	acme.noViolations(refusedCleanup(events.StreamResults), refusedCleanup(events.StreamEvents))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// directGetOf is a direct get of the last message on subject of stream, as c.
func directGetOf(c *client, stream, subject string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		m, err := c.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
		if err == nil && m.Header.Get("Status") != "" {
			return errors.New(m.Header.Get("Description"))
		}
		return err
	}
}
