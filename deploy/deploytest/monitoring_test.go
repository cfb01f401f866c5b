package deploytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// rulesFile and rulesTests are the plain Prometheus rules and their promtool unit tests.
func rulesFile(t *testing.T) string {
	return filepath.Join(repoRoot(t), "deploy", "prometheus", "toolfleet-rules.yaml")
}

func rulesTests(t *testing.T) string {
	return filepath.Join(repoRoot(t), "deploy", "prometheus", "toolfleet-rules.test.yaml")
}

func componentFile(t *testing.T, name string) string {
	return filepath.Join(repoRoot(t), "deploy", "k8s", "components", "prometheus", name)
}

// promtool returns the path of promtool, skipping the test where it is not installed,
// except in CI (.ci/run installs it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not on PATH: .ci/run installs Debian's prometheus package, which ships it")
		}
		t.Skip("promtool not on PATH (Debian: apt-get install prometheus)")
	}
	return p
}

// The rules are valid for Prometheus, and their unit tests pass: every alert fires on
// the series that should fire it and stays silent on those that should not.
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile(t)}, {"test", "rules", rulesTests(t)}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertRule is one rule of a rules file's groups.
type alertRule struct {
	group, alert, record, expr string
	labels, annotations        map[string]string
}

func ruleGroups(t *testing.T, groups []any) []alertRule {
	t.Helper()
	var rules []alertRule
	for _, g := range groups {
		for _, r := range list(g, "rules") {
			ar := alertRule{group: str(g, "name"), alert: str(r, "alert"), record: str(r, "record"), expr: str(r, "expr"),
				labels: map[string]string{}, annotations: map[string]string{}}
			for k, v := range asObj(get(r, "labels")) {
				ar.labels[k] = fmt.Sprint(v)
			}
			for k, v := range asObj(get(r, "annotations")) {
				ar.annotations[k] = fmt.Sprint(v)
			}
			rules = append(rules, ar)
		}
	}
	return rules
}

func loadRules(t *testing.T) []alertRule {
	t.Helper()
	return ruleGroups(t, list(decodeAll(t, rulesFile(t), readFile(t, rulesFile(t)))[0], "groups"))
}

// The PrometheusRule of the component holds exactly the groups of the plain rules file;
// every alert has a severity, a summary, a description and a runbook in
// docs/operations.md; every threshold an alert reads is recorded; and the promtool tests
// make each alert fire at least once and stay silent at least once.
func TestAlertRulesShipped(t *testing.T) {
	plain := decodeAll(t, rulesFile(t), readFile(t, rulesFile(t)))[0]
	pr := decodeAll(t, "prometheusrule.yaml", readFile(t, componentFile(t, "prometheusrule.yaml")))[0]
	if str(pr, "kind") != "PrometheusRule" {
		t.Fatalf("prometheusrule.yaml holds a %s", str(pr, "kind"))
	}
	if !reflect.DeepEqual(get(pr, "spec", "groups"), get(plain, "groups")) {
		t.Error("the PrometheusRule's groups differ from deploy/prometheus/toolfleet-rules.yaml: edit both")
	}

	ops := string(readFile(t, filepath.Join(repoRoot(t), "docs", "operations.md")))
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,4} (.+)$`).FindAllStringSubmatch(ops, -1) {
		anchors[githubAnchor(m[1])] = true
	}
	recorded := map[string]bool{}
	rules := loadRules(t)
	for _, r := range rules {
		if r.record == "toolfleet:alert_threshold" {
			recorded[r.labels["alert"]] = true
		}
	}
	const runbooks = "https://github.com/toolfleet/toolfleet/blob/main/docs/operations.md#"
	alerts := map[string]bool{}
	for _, r := range rules {
		if r.alert == "" {
			continue
		}
		alerts[r.alert] = true
		if s := r.labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.alert, s)
		}
		if r.annotations["summary"] == "" || r.annotations["description"] == "" {
			t.Errorf("%s: needs a summary and a description", r.alert)
		}
		anchor, ok := strings.CutPrefix(r.annotations["runbook_url"], runbooks)
		if !ok || anchor != strings.ToLower(r.alert) || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q, want %s%s, a heading of docs/operations.md", r.alert, r.annotations["runbook_url"], runbooks, strings.ToLower(r.alert))
		}
		for _, m := range regexp.MustCompile(`toolfleet:alert_threshold\{alert="([^"]+)"\}`).FindAllStringSubmatch(r.expr, -1) {
			if !recorded[m[1]] {
				t.Errorf("%s reads the threshold %s, which no rule records", r.alert, m[1])
			}
		}
	}

	fires, silent := map[string]bool{}, map[string]bool{}
	tests := decodeAll(t, rulesTests(t), readFile(t, rulesTests(t)))[0]
	for _, tc := range list(tests, "tests") {
		for _, a := range list(tc, "alert_rule_test") {
			if len(list(a, "exp_alerts")) > 0 {
				fires[str(a, "alertname")] = true
			} else {
				silent[str(a, "alertname")] = true
			}
		}
	}
	for a := range alerts {
		if !fires[a] || !silent[a] {
			t.Errorf("%s: the promtool tests must make it fire (%v) and keep it silent (%v)", a, fires[a], silent[a])
		}
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// query is one PromQL expression the monitoring ships, and where.
type query struct{ where, expr string }

// shippedQueries returns every expression of the alert and recording rules and of the
// dashboard's panels, with Grafana's interval variables given a value.
func shippedQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, r := range loadRules(t) {
		qs = append(qs, query{"rule " + r.alert + r.record, r.expr})
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(readFile(t, componentFile(t, "toolfleet-dashboard.json")), &dash); err != nil {
		t.Fatalf("toolfleet-dashboard.json: %v", err)
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, query{"panel " + p.Title, grafana.Replace(tg.Expr)})
		}
	}
	return qs
}

// externalSeries are the series the queries read from programs that are not
// toolfleet's, with their labels; the test cannot run them. The NATS pods' sidecar
// natsio/prometheus-nats-exporter:0.15.0 (deploy/k8s/base/nats/statefulset.yaml, run
// with -varz and -jsz=all) names its JetStream series jetstream_<server|stream|consumer>_*
// and its /varz series gnatsd_varz_*; kube-state-metrics names a Deployment's.
var externalSeries = func() map[string][]string {
	server := []string{"server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"}
	stream := append(slices.Clone(server), "account", "stream_name", "stream_leader", "is_stream_leader")
	consumer := append(slices.Clone(stream), "consumer_name", "consumer_leader", "is_consumer_leader", "consumer_desc")
	m := map[string][]string{
		"kube_deployment_status_replicas_available": {"namespace", "deployment"},
	}
	for _, n := range []string{"total_message_bytes", "max_storage", "max_memory", "total_streams", "total_consumers", "total_messages"} {
		m["jetstream_server_"+n] = server
	}
	for _, n := range []string{"num_pending", "num_ack_pending", "num_waiting", "num_redelivered"} {
		m["jetstream_consumer_"+n] = consumer
	}
	for _, n := range []string{"connections", "slow_consumers", "cpu", "mem", "in_msgs", "out_msgs"} {
		m["gnatsd_varz_"+n] = []string{"server_id"}
	}
	return m
}()

// targetLabels are the labels Prometheus (and the Operator's PodMonitors) add to every
// scraped series.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "endpoint"}

// scrape reads a /metrics page and adds each series name it serves (a histogram's
// _bucket, _sum and _count) with its labels to into.
func scrape(url string, into map[string]map[string]bool) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	for name, f := range families {
		names := []string{name}
		extra := map[string][]string{}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names = []string{name + "_bucket", name + "_sum", name + "_count"}
			extra[name+"_bucket"] = []string{"le"}
		case dto.MetricType_SUMMARY:
			names = []string{name, name + "_sum", name + "_count"}
			extra[name] = []string{"quantile"}
		}
		for _, n := range names {
			if into[n] == nil {
				into[n] = map[string]bool{}
			}
			for _, l := range extra[n] {
				into[n][l] = true
			}
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					into[n][lp.GetName()] = true
				}
			}
		}
	}
	return nil
}

// checkQuery parses expr and returns what it names that is not served: a series name
// missing from served, a label matched on a series that lacks it, or a label grouped,
// matched or copied that none of its series (nor a label_replace before it) has.
func checkQuery(expr string, served map[string]map[string]bool) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	have := map[string]bool{} // labels its series and label_replace calls bring
	for _, l := range targetLabels {
		have[l] = true
	}
	var used []string // labels grouped on, matched on or read
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			labels, ok := served[n.Name]
			if !ok {
				problems = append(problems, "series "+n.Name+", which no program serves")
				return nil
			}
			for l := range labels {
				have[l] = true
			}
			for _, m := range n.LabelMatchers {
				if m.Name != model.MetricNameLabel && !labels[m.Name] && !slices.Contains(targetLabels, m.Name) {
					problems = append(problems, fmt.Sprintf("label %s of %s, which it does not have", m.Name, n.Name))
				}
			}
		case *parser.AggregateExpr:
			used = append(used, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				used = append(used, n.VectorMatching.MatchingLabels...)
				used = append(used, n.VectorMatching.Include...)
			}
		case *parser.Call:
			if n.Func.Name == "label_replace" && len(n.Args) == 5 {
				if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
					have[dst.Val] = true
				}
				if src, ok := n.Args[3].(*parser.StringLiteral); ok {
					used = append(used, src.Val)
				}
			}
		}
		return nil
	})
	for _, l := range used {
		if !have[l] {
			problems = append(problems, "label "+l+", which none of its series has")
		}
	}
	return problems
}

// The monitoring names only what the programs serve. The real executor, picker and
// planner run, each under its own NATS user, carry runs (tool calls, picks, usage
// records, a cost), a dead letter, an approval left waiting and new runs past the
// planner's -max-starting; then every part's /metrics is scraped, and every series and label that
// an alert, a recording rule or a dashboard panel names must be among what they serve,
// or among what the NATS exporter and kube-state-metrics serve (externalSeries).
func TestMonitoringQueriesAreReal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every part")
	}
	qs := shippedQueries(t)
	served := map[string]map[string]bool{}
	for n, labels := range externalSeries {
		served[n] = map[string]bool{}
		for _, l := range labels {
			served[n][l] = true
		}
	}
	for _, r := range loadRules(t) {
		if r.record != "" {
			served[r.record] = map[string]bool{}
			for l := range r.labels {
				served[r.record][l] = true
			}
		}
	}

	srv := startAuthServer(t)
	bin := buildBinaries(t)
	dir := t.TempDir()
	script, prices := filepath.Join(dir, "script.yaml"), filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(script, []byte(composeScript), 0o600); err != nil {
		t.Fatal(err)
	}
	// Priced, so that runs are charged a cost.
	if err := os.WriteFile(prices, []byte("models:\n  scripted/script: {inputPerMTok: 1, outputPerMTok: 2}\ntools:\n  calculator: 0.01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	partEnv := map[string]map[string]string{
		"executor": {"TOOLFLEET_SANDBOX_ROOT": t.TempDir()},
		"picker":   {},
		"planner": {"TOOLFLEET_MODEL": "scripted/" + script, "TOOLFLEET_MAX_STARTING": "1", "TOOLFLEET_PRICES_FILE": prices,
			"TOOLFLEET_HTTP_ADDR": "127.0.0.1:" + strconv.Itoa(nettest.FreePort(t))},
	}
	var metricsURLs []string
	var procs []*process
	for _, part := range parts {
		environ := partEnv[part]
		environ["TOOLFLEET_NATS_URL"] = srv.srv.ClientURL()
		environ["TOOLFLEET_NATS_USER"] = part
		environ["TOOLFLEET_NATS_PASSWORD"] = passwords[part]
		ops := "127.0.0.1:" + strconv.Itoa(nettest.FreePort(t))
		environ["TOOLFLEET_OPS_ADDR"] = ops
		pr := start(t, part, bin, []string{"/usr/local/bin/" + part}, environ)
		pr.readyURL = "http://" + ops + "/readyz"
		procs = append(procs, pr)
		metricsURLs = append(metricsURLs, "http://"+ops+"/metrics")
	}
	for _, pr := range procs {
		pr.waitReady(t)
	}
	api := "http://" + partEnv["planner"]["TOOLFLEET_HTTP_ADDR"]
	seen := func(name string) func() bool {
		return func() bool {
			got := map[string]map[string]bool{}
			for _, u := range metricsURLs {
				if scrape(u, got) != nil {
					return false
				}
			}
			return got[name] != nil
		}
	}

	// Runs: the model calls calculator, then answers; the planner asks the picker, and
	// the picker learns from the usage record.
	resp, err := http.Post(api+"/v1/runs", "application/json", strings.NewReader(`{"input":"What is 17*23?","pick":true,"wait":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := readAll(resp)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(body, "391") {
		t.Fatalf("POST /v1/runs: %s %s (%v)", resp.Status, body, err)
	}
	natstest.Eventually(t, 30*time.Second, "the picker's usage records", seen("toolfleet_picker_usage_records_total"))
	natstest.Eventually(t, 30*time.Second, "the run's cost counted", seen("toolfleet_planner_cost_total"))

	// A message that names no caller on a call subject: a dead letter. A call of an
	// unsafe tool: an approval request.
	cl := srv.connect(t, "client")
	if err := cl.nc.Publish("toolfleet.call.calculator", []byte(`{"arguments":{"expression":"1+1"}}`)); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "a dead letter counted", seen("toolfleet_executor_dead_letters_total"))
	call := nats.NewMsg("toolfleet.call.write_file")
	call.Data = []byte(`{"arguments":{"path":"out.txt","content":"42"}}`)
	for _, h := range []string{"ce-specversion:1.0", "ce-id:call-approval", "ce-type:" + events.TypeCall, "ce-source:/monitoring-test",
		"ce-runid:run-approval", "Nats-Msg-Id:call-approval"} {
		k, v, _ := strings.Cut(h, ":")
		call.Header.Set(k, v)
	}
	if err := cl.nc.PublishMsg(call); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "an approval request counted", seen("toolfleet_executor_approvals_requested_total"))
	natstest.Eventually(t, 30*time.Second, "the approval seen waiting by a sweep", seen("toolfleet_executor_approvals_next_expiry_timestamp_seconds"))

	// More new runs at once than -max-starting: some are answered 429.
	if refusedOne(t, api) {
		natstest.Eventually(t, 30*time.Second, "a refused run counted", seen("toolfleet_planner_runs_refused_total"))
	} else {
		t.Log("no new run was refused with 429 in 4 bursts of 32")
	}

	for _, u := range metricsURLs {
		if err := scrape(u, served); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range qs {
		for _, p := range checkQuery(q.expr, served) {
			t.Errorf("%s names %s", q.where, p)
		}
	}
	if t.Failed() {
		var names []string
		for n := range served {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("served: %s", strings.Join(names, " "))
	}
}

// refusedOne starts bursts of 32 runs at once until the planner answers one with 429,
// and reports whether it did; other answers must be 202 or 200.
func refusedOne(t *testing.T, api string) bool {
	t.Helper()
	for range 4 {
		var wg sync.WaitGroup
		codes := make(chan int, 32)
		errs := make(chan error, 32)
		for range 32 {
			wg.Go(func() {
				resp, err := http.Post(api+"/v1/runs", "application/json", strings.NewReader(`{"input":"What is 17*23?"}`))
				if err != nil {
					errs <- err
					return
				}
				_, err = readAll(resp)
				errs <- err
				codes <- resp.StatusCode
			})
		}
		wg.Wait()
		close(codes)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		refused := false
		for c := range codes {
			switch c {
			case http.StatusTooManyRequests:
				refused = true
			case http.StatusOK, http.StatusAccepted, http.StatusCreated:
			default:
				t.Fatalf("POST /v1/runs answered %d", c)
			}
		}
		if refused {
			return true
		}
	}
	return false
}

func readAll(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
