package deploytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// apiRequest is one request a user makes, as the nats CLI, nats.go or nats.js send it.
type apiRequest struct {
	what, subject, body string
}

// The client user can run exactly what docs/deployment.md documents — publish a call, read its
// result with nats stream get --last-for, its own consumers (nats.go and nats.js
// forms), nats stream ls, nats kv ls, nats micro ls/info/stats — and each other request
// below is refused by the server, subject by subject. The sys user can ask the servers
// for their JetStream report (nats server report jetstream).
func TestClientUser(t *testing.T) {
	srv := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// What a running fleet has made: the streams and buckets, a result, and the picker.
	executor := srv.connect(t, "executor")
	cfg := events.DefaultConfig()
	if err := jsutil.Ensure(ctx, executor.js, cfg); err != nil {
		t.Fatalf("executor: jsutil.Ensure: %v", err)
	}
	res, err := events.NewResult("/toolfleet/executor", events.Result{Status: events.StatusOK,
		Output: json.RawMessage(`42`), Attempts: 1, Tool: "calculator", CallID: "call1", RunID: "run1"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := executor.js.PublishMsg(ctx, res); err != nil {
		t.Fatalf("executor: publish result: %v", err)
	}
	picker := srv.connect(t, "picker")
	svc, err := micro.AddService(picker.nc, micro.Config{Name: "toolfleet-picker", Version: "0.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddGroup("toolfleet.picker").AddEndpoint("pick", micro.HandlerFunc(func(r micro.Request) {
		_ = r.RespondJSON([]string{"calculator"})
	})); err != nil {
		t.Fatal(err)
	}

	cl := srv.connect(t, "client")

	// docs/deployment.md: nats pub toolfleet.call.calculator … -H ce-…; and an approval answer.
	call := nats.NewMsg("toolfleet.call.calculator")
	call.Data = []byte(`{"arguments":{"expression":"6*7"}}`)
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "call2", "ce-type": "io.toolfleet.tool.call",
		"ce-source": "/me", "ce-runid": "run2", "Nats-Msg-Id": "call2"} {
		call.Header.Set(k, v)
	}
	if _, err := cl.js.PublishMsg(ctx, call); err != nil {
		t.Errorf("client: publish a call: %v", err)
	}
	answer, _ := events.ApprovalAnsweredSubject(events.Identity{}, "write_file", "call3")
	if _, err := cl.js.Publish(ctx, answer, []byte(`{"decision":"approve"}`)); err != nil {
		t.Errorf("client: answer an approval: %v", err)
	}
	if m, err := events.NewCancel("/me", events.Identity{}, "calculator", "call2", events.Cancel{}); err != nil {
		t.Fatal(err)
	} else if _, err := cl.js.PublishMsg(ctx, m); err != nil {
		t.Errorf("client: cancel a call: %v", err)
	}

	const consumer = `{"stream_name":%q,"config":{"name":%q,%s,"ack_policy":"none","inactive_threshold":60000000000}}`
	allowed := []apiRequest{
		{"account info (every nats command)", "$JS.API.INFO", ""},
		{"nats stream ls", "$JS.API.STREAM.LIST", `{"offset":0}`},
		{"stream names only (nats stream ls --names)", "$JS.API.STREAM.NAMES", `{"offset":0}`},
		{"nats kv ls", "$JS.API.STREAM.LIST", `{"offset":0,"subject":"$KV.*.>"}`},
		{"nats stream get: load the stream", "$JS.API.STREAM.INFO." + events.StreamResults, ""},
		{"nats stream get TOOLFLEET_RESULTS --last-for", "$JS.API.STREAM.MSG.GET." + events.StreamResults, `{"last_by_subj":"toolfleet.result.run1.call1"}`},
		{"direct get of the last result on a subject", "$JS.API.DIRECT.GET." + events.StreamResults + ".toolfleet.result.run1.call1", ""},
		{"direct get by request", "$JS.API.DIRECT.GET." + events.StreamResults, `{"last_by_subj":"toolfleet.result.run1.call1"}`},
		{"a consumer, filter in the subject (nats.go, nats CLI)", "$JS.API.CONSUMER.CREATE." + events.StreamResults + ".c1.toolfleet.result.run1.*",
			fmt.Sprintf(consumer, events.StreamResults, "c1", `"filter_subject":"toolfleet.result.run1.*"`)},
		{"a consumer, filters in the body only (nats.js filter_subjects)", "$JS.API.CONSUMER.CREATE." + events.StreamResults + ".c2",
			fmt.Sprintf(consumer, events.StreamResults, "c2", `"filter_subjects":["toolfleet.result.run1.*","toolfleet.result.run2.*"]`)},
		{"an events consumer (nats.js filter_subjects)", "$JS.API.CONSUMER.CREATE." + events.StreamEvents + ".c3",
			fmt.Sprintf(consumer, events.StreamEvents, "c3", `"filter_subjects":["toolfleet.event.run.run1.*"]`)},
		{"consumer info", "$JS.API.CONSUMER.INFO." + events.StreamResults + ".c2", ""},
		{"nats micro ls", "$SRV.INFO", ""},
		{"nats micro info", "$SRV.INFO.toolfleet-picker", ""},
		{"nats micro stats", "$SRV.STATS.toolfleet-picker", ""},
		{"micro discovery ping (nats micro ping)", "$SRV.PING", ""},
		{"ask the picker", "toolfleet.picker.pick", `{"input":"calculate 17*23"}`},
	}
	// The commands named here are the ones docs/deployment.md documents for the client user.
	readme := string(readFile(t, filepath.Join(repoRoot(t), "docs", "deployment.md")))
	for _, r := range allowed {
		if cmd, _, _ := strings.Cut(r.what, ":"); strings.HasPrefix(cmd, "nats ") && !strings.Contains(readme, cmd) {
			t.Errorf("docs/deployment.md does not document %q, which this test allows the client", cmd)
		}
	}
	for _, r := range allowed {
		reply, err := cl.nc.Request(r.subject, []byte(r.body), 5*time.Second)
		if err != nil {
			t.Errorf("client: %s (%s): %v", r.what, r.subject, err)
			continue
		}
		var apiErr struct {
			Error *struct {
				Code        int    `json:"code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		if json.Unmarshal(reply.Data, &apiErr) == nil && apiErr.Error != nil {
			t.Errorf("client: %s (%s): %d %s", r.what, r.subject, apiErr.Error.Code, apiErr.Error.Description)
		}
		if st := reply.Header.Get("Status"); st != "" {
			t.Errorf("client: %s (%s): status %s %s", r.what, r.subject, st, reply.Header.Get("Description"))
		}
	}
	// A fetch from its own consumer delivers the result (the reply is the message).
	next, err := cl.nc.Request("$JS.API.CONSUMER.MSG.NEXT."+events.StreamResults+".c2", []byte(`{"batch":1,"expires":2000000000}`), 5*time.Second)
	if err != nil || next.Subject != "toolfleet.result.run1.call1" {
		t.Errorf("client: fetch from its consumer: %v (got %+v)", err, next)
	}
	cl.noViolations()

	// Everything else is refused: managing streams and consumers, reading what other
	// parts keep, acking, and publishing anything but calls and approval answers.
	refused := []apiRequest{
		{"create a stream", "$JS.API.STREAM.CREATE.EVIL", `{"name":"EVIL","subjects":["evil.>"]}`},
		{"update the results stream", "$JS.API.STREAM.UPDATE." + events.StreamResults, `{}`},
		{"delete the results stream", "$JS.API.STREAM.DELETE." + events.StreamResults, ""},
		{"purge the results stream", "$JS.API.STREAM.PURGE." + events.StreamResults, ""},
		{"delete a result", "$JS.API.STREAM.MSG.DELETE." + events.StreamResults, `{"seq":1}`},
		{"inspect the calls stream", "$JS.API.STREAM.INFO." + events.StreamCalls, ""},
		{"read a call", "$JS.API.STREAM.MSG.GET." + events.StreamCalls, `{"seq":1}`},
		{"read a call directly", "$JS.API.DIRECT.GET." + events.StreamCalls + ".toolfleet.call.calculator", ""},
		{"read run state", "$JS.API.DIRECT.GET.KV_" + events.BucketRuns + ".$KV." + events.BucketRuns + ".run1", ""},
		{"read the in-flight bucket", "$JS.API.STREAM.MSG.GET.KV_" + events.BucketInflight, `{"seq":1}`},
		{"read the limits bucket", "$JS.API.DIRECT.GET.KV_" + events.BucketLimits + ".$KV." + events.BucketLimits + ".r.echo", ""},
		{"inspect the limits bucket", "$JS.API.STREAM.INFO.KV_" + events.BucketLimits, ""},
		{"read the dead letters", "$JS.API.STREAM.MSG.GET." + events.StreamDeadLetters, `{"seq":1}`},
		{"consume calls", "$JS.API.CONSUMER.CREATE." + events.StreamCalls + ".spy", `{}`},
		{"consume a tool's calls", "$JS.API.CONSUMER.CREATE." + events.StreamCalls + ".spy.toolfleet.call.calculator", `{}`},
		{"fetch from the executors' consumer", "$JS.API.CONSUMER.MSG.NEXT." + events.StreamCalls + "." + events.ConsumerName("calculator"), `{"batch":1}`},
		{"create a legacy durable", "$JS.API.CONSUMER.DURABLE.CREATE." + events.StreamResults + ".d1", `{}`},
		{"delete a consumer", "$JS.API.CONSUMER.DELETE." + events.StreamResults + ".c1", ""},
		{"list consumers", "$JS.API.CONSUMER.LIST." + events.StreamResults, `{}`},
		{"watch the catalog", "$JS.API.CONSUMER.CREATE.KV_toolfleet-catalog.spy", `{}`},
		{"step down the meta leader", "$JS.API.META.LEADER.STEPDOWN", ""},
		{"remove a server", "$JS.API.SERVER.REMOVE", `{}`},
		{"ask the servers for reports", "$SYS.REQ.SERVER.PING.JSZ", ""},
		{"reconfigure the planner's results consumer", "$JS.API.CONSUMER.CREATE." + events.StreamResults + "." + events.PlannerResultsConsumer,
			fmt.Sprintf(consumer, events.StreamResults, events.PlannerResultsConsumer, `"filter_subjects":["toolfleet.result.none.*"]`)},
		{"reconfigure it, filter in the subject", "$JS.API.CONSUMER.CREATE." + events.StreamResults + "." + events.PlannerResultsConsumer + ".toolfleet.result.>", `{}`},
		{"fetch the planner's results", "$JS.API.CONSUMER.MSG.NEXT." + events.StreamResults + "." + events.PlannerResultsConsumer, `{"batch":1}`},
		{"reconfigure the planner's approvals consumer", "$JS.API.CONSUMER.CREATE." + events.StreamEvents + "." + events.PlannerApprovalsConsumer, `{}`},
		{"reconfigure it, filter in the subject", "$JS.API.CONSUMER.CREATE." + events.StreamEvents + "." + events.PlannerApprovalsConsumer + ".toolfleet.event.approval.requested.>", `{}`},
		{"fetch the planner's approval requests", "$JS.API.CONSUMER.MSG.NEXT." + events.StreamEvents + "." + events.PlannerApprovalsConsumer, `{"batch":1}`},
	}
	for _, r := range refused {
		cl.denied(r.what, r.subject, func(ctx context.Context) error {
			_, err := cl.nc.RequestWithContext(ctx, r.subject, []byte(r.body))
			return err
		})
	}
	for what, subject := range map[string]string{
		"publish a result":              "toolfleet.result.run1.call9",
		"publish a run event":           "toolfleet.event.run.run1.done",
		"request an approval":           "toolfleet.event.approval.requested.write_file.call3",
		"dead-letter a call":            "toolfleet.dlq.calculator",
		"publish a plan step":           "toolfleet.plan.run1",
		"put a tool in the catalog":     "$KV.toolfleet-catalog.evil",
		"write run state":               "$KV." + events.BucketRuns + ".run1",
		"ack a message of the planner":  "$JS.ACK." + events.StreamResults + "." + events.PlannerResultsConsumer + ".1.1.1.1.0",
		"ack a message (v2 ack format)": "$JS.ACK.hub.acc." + events.StreamResults + "." + events.PlannerResultsConsumer + ".1.1.1.1.0.x",
	} {
		cl.denied(what, subject, func(ctx context.Context) error {
			_, err := cl.js.Publish(ctx, subject, []byte(`{}`))
			return err
		})
	}
	for _, subject := range []string{"toolfleet.>", "toolfleet.call.calculator", "$SRV.>", ">"} {
		cl.denied("subscribe to "+subject, subject, func(context.Context) error {
			if _, err := cl.nc.SubscribeSync(subject); err != nil {
				return err
			}
			return errRefusedLater
		})
	}

	// nats server report jetstream, as the operator user of the system account.
	sys := srv.connect(t, "sys")
	reply, err := sys.nc.Request("$SYS.REQ.SERVER.PING.JSZ", []byte(`{"accounts":true}`), 5*time.Second)
	if err != nil {
		t.Fatalf("sys: JetStream report: %v", err)
	}
	var jsz struct {
		Data struct {
			Streams int `json:"streams"`
		} `json:"data"`
	}
	if err := json.Unmarshal(reply.Data, &jsz); err != nil || jsz.Data.Streams == 0 {
		t.Errorf("sys: JetStream report %s (%v), want the toolfleet streams counted", reply.Data, err)
	}
	sys.noViolations()
}

// errRefusedLater stands for an operation whose refusal the server reports
// asynchronously (a subscription); denied then waits for the violation.
var errRefusedLater = errors.New("refusal reported asynchronously")
