package deploytest

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Every YAML file under deploy/k8s parses, and every file a kustomization names exists.
func TestKustomizationsNameExistingFiles(t *testing.T) {
	k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
	kustomizations, components := 0, 0
	for _, f := range yamlFiles(t, k8s) {
		docs := decodeAll(t, f, readFile(t, f))
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
		if filepath.Base(f) != "kustomization.yaml" {
			for _, d := range docs {
				if str(d, "kind") == "" || str(d, "apiVersion") == "" {
					t.Errorf("%s: a document without kind or apiVersion", f)
				}
			}
			continue
		}
		k, dir := docs[0], filepath.Dir(f)
		if str(k, "kind") == "Component" {
			components++
		} else {
			kustomizations++
		}
		var named []string
		for _, r := range list(k, "resources") {
			named = append(named, r.(string))
		}
		for _, p := range list(k, "patches") {
			if path := str(p, "path"); path != "" {
				named = append(named, path)
			}
		}
		for _, gen := range append(list(k, "configMapGenerator"), list(k, "secretGenerator")...) {
			for _, key := range []string{"files", "envs"} {
				for _, file := range list(gen, key) {
					_, path, _ := strings.Cut(file.(string), "=") // "key=path" or "path"
					if path == "" {
						path = file.(string)
					}
					named = append(named, path)
				}
			}
		}
		for _, n := range named {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				t.Errorf("%s names %s: %v", f, n, err)
			}
		}
	}
	if kustomizations != 4 || components != 1 {
		t.Errorf("found %d kustomizations and %d components, want base, overlays/dev, overlays/prod, overlays/sharded and components/prometheus", kustomizations, components)
	}
}

// overlay is one rendered kustomization and what it must look like.
type overlay struct {
	dir            string
	natsNodes      int
	streamReplicas int
	keda           bool
	syncAlways     bool
	shards         int // events.Config Shards (0: one shard)
}

var overlays = []overlay{
	{dir: "overlays/dev", natsNodes: 1, streamReplicas: 1, keda: false, syncAlways: true},
	{dir: "overlays/prod", natsNodes: 3, streamReplicas: 3, keda: true, syncAlways: false},
	{dir: "overlays/sharded", natsNodes: 3, streamReplicas: 3, keda: true, syncAlways: false, shards: shippedShards},
}

// The rendered dev and prod overlays are consistent with the code and with each other.
func TestRenderedOverlays(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov.dir, func(t *testing.T) {
			docs := render(t, filepath.Join(repoRoot(t), "deploy", "k8s", ov.dir))
			checkWorkloads(t, docs)
			checkFleetSettings(t, docs)
			checkNATS(t, docs, ov)
			checkScaling(t, docs, ov)
			checkSecrets(t, docs, ov)
			checkNetworkPolicy(t, docs)
		})
	}
	// The Prometheus Operator component, added to prod as its comment says.
	t.Run("components/prometheus", func(t *testing.T) {
		k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
		dir := t.TempDir()
		rel := func(p string) string { // kustomize takes relative paths only
			r, err := filepath.Rel(dir, filepath.Join(k8s, p))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
			"resources: [" + rel("overlays/prod") + "]\ncomponents: [" + rel("components/prometheus") + "]\n"
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
		docs := render(t, dir)
		monitors := 0
		for _, pm := range docs {
			if str(pm, "kind") != "PodMonitor" {
				continue
			}
			monitors++
			matched := 0
			for _, w := range workloads(docs) {
				if !selects(get(pm, "spec", "selector"), get(w, "spec", "template", "metadata", "labels")) {
					continue
				}
				matched++
				for _, ep := range list(pm, "spec", "podMetricsEndpoints") {
					if !hasPort(w, str(ep, "port")) {
						t.Errorf("PodMonitor %s scrapes port %s, which %s does not name", name(pm), str(ep, "port"), name(w))
					}
				}
			}
			if matched == 0 {
				t.Errorf("PodMonitor %s selects no workload", name(pm))
			}
		}
		if monitors != 2 {
			t.Errorf("%d PodMonitors, want NATS and the parts", monitors)
		}
	})
}

// selects reports whether a label selector (matchLabels, matchExpressions with In)
// matches labels.
func selects(selector, labels any) bool {
	for k, v := range asObj(get(selector, "matchLabels")) {
		if get(labels, k) != v {
			return false
		}
	}
	for _, e := range list(selector, "matchExpressions") {
		if str(e, "operator") != "In" || !slices.Contains(list(e, "values"), get(labels, str(e, "key"))) {
			return false
		}
	}
	return true
}

func asObj(v any) obj { o, _ := v.(obj); return o }

// hasPort reports whether a container of workload w names port.
func hasPort(w obj, port string) bool {
	for _, c := range containers(w) {
		for _, p := range list(c, "ports") {
			if str(p, "name") == port || fmt.Sprint(get(p, "containerPort")) == port {
				return true
			}
		}
	}
	return false
}

// checkNetworkPolicy requires the NATS policy to admit, port by port, exactly: routes
// from the NATS pods, clients from the toolfleet parts, monitoring from the KEDA and
// Prometheus namespaces, metrics from Prometheus; and every port it names to be a port
// of the NATS container.
func checkNetworkPolicy(t *testing.T, docs []obj) {
	np := find(docs, "NetworkPolicy", "nats")
	if np == nil {
		t.Fatal("no NetworkPolicy nats")
	}
	sts := find(docs, "StatefulSet", "nats")
	if !selects(get(np, "spec", "podSelector"), get(sts, "spec", "template", "metadata", "labels")) {
		t.Error("NetworkPolicy nats does not select the NATS pods")
	}
	if fmt.Sprint(get(np, "spec", "policyTypes")) != "[Ingress]" {
		t.Errorf("policyTypes %v, want [Ingress]", get(np, "spec", "policyTypes"))
	}
	got := map[string][]string{} // port -> peers
	for _, rule := range list(np, "spec", "ingress") {
		var peers []string
		for _, f := range list(rule, "from") {
			switch {
			case get(f, "podSelector") != nil && get(f, "namespaceSelector") == nil:
				peers = append(peers, "pods:"+fmt.Sprint(get(f, "podSelector", "matchLabels")))
			case get(f, "namespaceSelector") != nil && get(f, "podSelector") == nil:
				peers = append(peers, "namespace:"+str(f, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"))
			default:
				t.Errorf("NetworkPolicy nats: a peer %v that is neither pods of this namespace nor a namespace", f)
			}
		}
		if len(peers) == 0 {
			t.Error("NetworkPolicy nats: a rule without from admits everyone")
		}
		for _, p := range list(rule, "ports") {
			port := fmt.Sprint(get(p, "port"))
			if !hasPort(sts, port) {
				t.Errorf("NetworkPolicy nats names port %s, which the NATS pods do not", port)
			}
			got[port] = append(got[port], peers...)
		}
	}
	want := map[string][]string{
		"cluster": {"pods:map[app.kubernetes.io/name:nats]"},
		"client":  {"pods:map[app.kubernetes.io/part-of:toolfleet]"},
		"monitor": {"namespace:keda", "namespace:monitoring"},
		"metrics": {"namespace:monitoring"},
	}
	for port, peers := range want {
		if !slices.Equal(got[port], peers) {
			t.Errorf("NetworkPolicy nats admits %v on %s, want %v", got[port], port, peers)
		}
	}
	if len(got) != len(want) {
		t.Errorf("NetworkPolicy nats opens %d ports, want %d", len(got), len(want))
	}
}

// workloads returns the rendered Deployments and StatefulSets.
func workloads(docs []obj) []obj {
	var w []obj
	for _, d := range docs {
		if k := str(d, "kind"); k == "Deployment" || k == "StatefulSet" {
			w = append(w, d)
		}
	}
	return w
}

func containers(w obj) []obj {
	var cs []obj
	for _, c := range list(w, "spec", "template", "spec", "containers") {
		cs = append(cs, c.(obj))
	}
	return cs
}

// env returns a container's environment: literal values, and "secret:<name>/<key>",
// "configmap:<name>/<key>" or "field:<path>" for references.
func env(c obj) map[string]string {
	e := map[string]string{}
	for _, v := range list(c, "env") {
		n := str(v, "name")
		switch {
		case get(v, "valueFrom", "secretKeyRef") != nil:
			e[n] = "secret:" + str(v, "valueFrom", "secretKeyRef", "name") + "/" + str(v, "valueFrom", "secretKeyRef", "key")
		case get(v, "valueFrom", "configMapKeyRef") != nil:
			e[n] = "configmap:" + str(v, "valueFrom", "configMapKeyRef", "name") + "/" + str(v, "valueFrom", "configMapKeyRef", "key")
		case get(v, "valueFrom", "fieldRef") != nil:
			e[n] = "field:" + str(v, "valueFrom", "fieldRef", "fieldPath")
		default:
			e[n] = str(v, "value")
		}
	}
	return e
}

// binary is the toolfleet command a container runs (/usr/local/bin/<bin>), or "".
func binary(c obj) string {
	cmd := list(c, "command")
	if len(cmd) == 0 {
		return ""
	}
	s, _ := cmd[0].(string)
	if b, ok := strings.CutPrefix(s, "/usr/local/bin/"); ok {
		return b
	}
	return ""
}

func checkWorkloads(t *testing.T, docs []obj) {
	for _, w := range workloads(docs) {
		wn := str(w, "kind") + "/" + name(w)
		pod := get(w, "spec", "template", "spec")
		if get(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", wn)
		}
		if get(pod, "automountServiceAccountToken") != false {
			t.Errorf("%s: mounts a service account token it does not need", wn)
		}
		for _, c := range containers(w) {
			cn := wn + "/" + str(c, "name")
			if get(c, "resources", "requests", "cpu") == nil || get(c, "resources", "requests", "memory") == nil ||
				get(c, "resources", "limits", "memory") == nil {
				t.Errorf("%s: needs cpu and memory requests and a memory limit", cn)
			}
			sc := get(c, "securityContext")
			if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false ||
				fmt.Sprint(get(sc, "capabilities", "drop")) != "[ALL]" {
				t.Errorf("%s: securityContext must be read-only root, no privilege escalation, drop ALL capabilities: %v", cn, sc)
			}
			ports := map[string]bool{}
			for _, p := range list(c, "ports") {
				ports[str(p, "name")] = true
				ports[fmt.Sprint(get(p, "containerPort"))] = true
			}
			for _, probe := range []string{"livenessProbe", "readinessProbe"} {
				pr := get(c, probe)
				if pr == nil {
					t.Errorf("%s: no %s", cn, probe)
					continue
				}
				port := fmt.Sprint(get(pr, "httpGet", "port"))
				if get(pr, "tcpSocket") != nil {
					port = fmt.Sprint(get(pr, "tcpSocket", "port"))
				}
				if !ports[port] {
					t.Errorf("%s: %s probes port %s, which the container does not expose (%v)", cn, probe, port, ports)
				}
			}
			if bin := binary(c); bin != "" {
				checkCode(t, cn, bin, c)
			}
		}
		if name(w) == "executor-builtin" {
			checkGrace(t, w)
		}
	}
}

// checkFleetSettings requires every planner and executor to read the operator roles from
// one ConfigMap key, which the rendered output holds: the planner accepts an operator's
// act and the executors carry it out only when they decide with the same roles.
func checkFleetSettings(t *testing.T, docs []obj) {
	refs := map[string]bool{}
	parts := 0
	for _, w := range workloads(docs) {
		for _, c := range containers(w) {
			if bin := binary(c); bin == "planner" || bin == "executor" {
				parts++
				refs[env(c)["TOOLFLEET_OPERATOR_ROLES"]] = true
			}
		}
	}
	if parts < 2 || len(refs) != 1 {
		t.Fatalf("%d planners and executors take TOOLFLEET_OPERATOR_ROLES from %v; want all from one ConfigMap key", parts, refs)
	}
	for ref := range refs {
		cm, key, _ := strings.Cut(strings.TrimPrefix(ref, "configmap:"), "/")
		found := false
		for _, d := range docs {
			if str(d, "kind") == "ConfigMap" && name(d) == cm && get(d, "data", key) != nil {
				found = true
			}
		}
		if !strings.HasPrefix(ref, "configmap:") || !found {
			t.Errorf("TOOLFLEET_OPERATOR_ROLES comes from %s, which the rendered output does not hold", ref)
		}
	}
}

// checkCode requires every environment variable and probe path of a toolfleet container
// to be read or served by the binary it runs.
func checkCode(t *testing.T, cn, bin string, c obj) {
	t.Run("code/"+bin, func(t *testing.T) {
		code := codeOf(t, bin)
		for n := range env(c) {
			if !code.readsEnv(n) {
				t.Errorf("%s sets %s, which cmd/%s never reads", cn, n, bin)
			}
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe"} {
			p := str(c, probe, "httpGet", "path")
			if p == "" || code.servesPath(p) {
				continue
			}
			t.Errorf("%s: %s asks %s, which cmd/%s does not serve", cn, probe, p, bin)
		}
	})
}

// The executor gets TOOLFLEET_GRACE_PERIOD to finish its calls after SIGTERM; Kubernetes
// must not SIGKILL it before.
func checkGrace(t *testing.T, w obj) {
	grace, err := time.ParseDuration(env(containers(w)[0])["TOOLFLEET_GRACE_PERIOD"])
	if err != nil {
		t.Errorf("executor: TOOLFLEET_GRACE_PERIOD: %v", err)
		return
	}
	kill, _ := get(w, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
	if time.Duration(kill)*time.Second <= grace+5*time.Second {
		t.Errorf("executor: terminationGracePeriodSeconds %d leaves no margin over its grace period %s", kill, grace)
	}
}

var envRef = regexp.MustCompile(`[:=][ \t]*\$([A-Z][A-Z0-9_]*)`) // an unquoted value: a variable

// natsWant is what a shipped NATS config must hold once nats-server has parsed it: the
// values the deployment's guarantees and limits rest on, compared as parsed, because
// the config format reads some spellings differently than they look (an unquoted 2m is
// the number 2,000,000, i.e. seconds).
type natsWant struct {
	syncAlways   bool
	syncInterval time.Duration // when not always
	maxMemory    int64
	maxStore     int64
}

var natsWants = map[string]natsWant{
	"overlays/dev":     {syncAlways: true, maxMemory: 128 << 20, maxStore: 2 << 30},
	"overlays/prod":    {syncInterval: 2 * time.Minute, maxMemory: 256 << 20, maxStore: 20 << 30},
	"overlays/sharded": {syncInterval: 2 * time.Minute, maxMemory: 256 << 20, maxStore: 20 << 30},
	"compose":          {syncAlways: true, maxMemory: 256 << 20, maxStore: 10 << 30},
}

// maxPayload is every config's max_payload: events are bounded by pkg/events MaxMsgSize
// plus headers, well under it.
const maxPayload = 8 << 20

// checkNATS checks the NATS StatefulSet against its config: node count, the generated
// ConfigMap (auth.conf byte for byte, a config nats-server loads with the pod's command
// line and environment, the durability choice), and that every variable the config
// names is in the pod's environment.
func checkNATS(t *testing.T, docs []obj, ov overlay) {
	sts := find(docs, "StatefulSet", "nats")
	if sts == nil {
		t.Fatal("no StatefulSet nats")
	}
	if n, _ := get(sts, "spec", "replicas").(int); n != ov.natsNodes {
		t.Errorf("NATS nodes: %d, want %d", n, ov.natsNodes)
	}
	if get(sts, "spec", "volumeClaimTemplates") == nil {
		t.Error("NATS has no volume claim for its JetStream store")
	}
	var cm obj
	for _, d := range docs {
		if str(d, "kind") == "ConfigMap" && strings.HasPrefix(name(d), "nats-config") {
			cm = d
		}
	}
	if cm == nil {
		t.Fatal("no nats-config ConfigMap")
	}
	mounted := false
	for _, v := range list(sts, "spec", "template", "spec", "volumes") {
		mounted = mounted || str(v, "configMap", "name") == name(cm)
	}
	if !mounted {
		t.Errorf("the NATS pods do not mount %s", name(cm))
	}
	auth := str(cm, "data", "auth.conf")
	if auth != string(readFile(t, authConf(t))) {
		t.Error("the ConfigMap's auth.conf differs from deploy/k8s/base/nats/auth.conf")
	}
	conf := str(cm, "data", "nats.conf")
	natsC := containers(sts)[0]
	podEnv := env(natsC)
	for _, m := range envRef.FindAllStringSubmatch(conf+auth, -1) {
		if _, ok := podEnv[m[1]]; !ok && !strings.Contains(auth, m[1]+" =") {
			t.Errorf("the NATS config reads $%s, which the pod's environment lacks", m[1])
		}
	}
	if !strings.Contains(conf, "\n  sync_interval:") {
		t.Error("nats.conf must state sync_interval explicitly")
	}
	var args []string
	for _, a := range list(natsC, "args") {
		args = append(args, fmt.Sprint(a))
	}
	environ := serverEnv(t)
	environ["POD_NAME"] = "nats-0"
	opts := loadConfig(t, conf, auth, expandArgs(t, args, podEnv, "nats-0"), environ)
	checkParsedNATS(t, opts, natsWants[ov.dir], passwords)
	if (len(opts.Routes) > 0) != (ov.natsNodes > 1) {
		t.Errorf("%d cluster routes for %d nodes", len(opts.Routes), ov.natsNodes)
	}
	if ov.natsNodes > 1 {
		checkRoutes(t, opts, str(sts, "spec", "serviceName"), ov.natsNodes)
	}
	if opts.ServerName != "nats-0" {
		t.Errorf("server_name is %q, want the pod name", opts.ServerName)
	}
	// Every part logs in as a user of auth.conf, with the plaintext whose hash the
	// server is given for that user: key <user> of toolfleet-nats-users for the part,
	// key <user>-bcrypt of toolfleet-nats-server for the server.
	users := map[string]bool{}
	for _, u := range opts.Users {
		users[u.Username] = true
	}
	for _, w := range workloads(docs) {
		for _, c := range containers(w) {
			e := env(c)
			user := e["TOOLFLEET_NATS_USER"]
			if binary(c) == "" {
				continue
			}
			if !users[user] {
				t.Errorf("%s logs in as %q, not a user of auth.conf", name(w), user)
			}
			if got, want := e["TOOLFLEET_NATS_PASSWORD"], "secret:toolfleet-nats-users/"+user; got != want {
				t.Errorf("%s: password %s, want %s", name(w), got, want)
			}
			if got, want := podEnv[hashVar(user)], "secret:toolfleet-nats-server/"+user+"-bcrypt"; got != want {
				t.Errorf("NATS checks %q against %s, want %s", user, got, want)
			}
			if r := e["TOOLFLEET_STREAM_REPLICAS"]; r != "" && r != strconv.Itoa(ov.streamReplicas) {
				t.Errorf("%s: TOOLFLEET_STREAM_REPLICAS=%s on %d NATS nodes, want %d", name(w), r, ov.natsNodes, ov.streamReplicas)
			}
			if u := e["TOOLFLEET_NATS_URL"]; find(docs, "Service", strings.TrimSuffix(strings.TrimPrefix(u, "nats://"), ":4222")) == nil {
				t.Errorf("%s: TOOLFLEET_NATS_URL %s is not a Service on 4222", name(w), u)
			}
		}
	}
	if err := (events.Config{Replicas: ov.streamReplicas}).Validate(); err != nil {
		t.Errorf("stream replicas %d: %v", ov.streamReplicas, err)
	}
}

// checkParsedNATS asserts the values that matter as nats-server parsed them: durability,
// payload and JetStream limits, for every user a bcrypt hash of its plaintext in
// plaintext, and the system account with its operator user.
func checkParsedNATS(t *testing.T, opts *server.Options, want natsWant, plaintext map[string]string) {
	t.Helper()
	if !opts.JetStream {
		t.Error("JetStream is off")
	}
	if opts.SyncAlways != want.syncAlways || (!want.syncAlways && opts.SyncInterval != want.syncInterval) {
		t.Errorf("sync_interval parsed as always=%v interval=%s, want always=%v interval=%s",
			opts.SyncAlways, opts.SyncInterval, want.syncAlways, want.syncInterval)
	}
	if opts.MaxPayload != maxPayload {
		t.Errorf("max_payload parsed as %d, want %d", opts.MaxPayload, maxPayload)
	}
	if opts.JetStreamMaxMemory != want.maxMemory || opts.JetStreamMaxStore != want.maxStore {
		t.Errorf("JetStream limits parsed as memory %d, store %d; want %d, %d",
			opts.JetStreamMaxMemory, opts.JetStreamMaxStore, want.maxMemory, want.maxStore)
	}
	if opts.HTTPPort != 8222 {
		t.Errorf("monitoring port %d, want 8222 (probes, KEDA, the exporter)", opts.HTTPPort)
	}
	if opts.SystemAccount != "SYS" {
		t.Errorf("system account %q, want SYS", opts.SystemAccount)
	}
	seen := map[string]string{}
	for _, u := range opts.Users {
		acc := "$G"
		if u.Account != nil {
			acc = u.Account.Name
		}
		seen[u.Username] = acc
		if bcrypt.CompareHashAndPassword([]byte(u.Password), []byte(plaintext[u.Username])) != nil {
			t.Errorf("user %s: the password is not the bcrypt hash of %q", u.Username, plaintext[u.Username])
		}
	}
	for user := range plaintext {
		want := "$G"
		if user == "sys" {
			want = "SYS"
		}
		if seen[user] != want {
			t.Errorf("user %s is in account %q, want %q", user, seen[user], want)
		}
	}
	if len(seen) != len(plaintext) {
		t.Errorf("users %v, want exactly those of the deployment", seen)
	}
}

// checkRoutes requires authenticated routes: a route user with the route password, and
// a route to every node of the StatefulSet under its headless service, each carrying
// those credentials.
func checkRoutes(t *testing.T, opts *server.Options, service string, nodes int) {
	t.Helper()
	if opts.Cluster.Username != "route" || opts.Cluster.Password != routePassword {
		t.Errorf("cluster authorization %q/%q, want user route with NATS_ROUTE_PASSWORD", opts.Cluster.Username, opts.Cluster.Password)
	}
	hosts := map[string]bool{}
	for _, r := range opts.Routes {
		pw, _ := r.User.Password()
		if r.User.Username() != "route" || pw != routePassword {
			t.Errorf("route %s does not log in as the route user", r.Redacted())
		}
		host := r.Hostname() // nats-<i>.<headless service>
		i, svc, _ := strings.Cut(host, ".")
		if svc != service || !strings.HasPrefix(i, "nats-") {
			t.Errorf("route %s is not a pod of the StatefulSet's service %s", host, service)
		}
		hosts[host] = true
	}
	if len(hosts) != nodes {
		t.Errorf("routes to %d nodes, want %d", len(hosts), nodes)
	}
}

// expandArgs resolves $(VAR) in a container's args as Kubernetes does, from the pod's
// environment: literals, the pod name, and the test's Secret values.
func expandArgs(t *testing.T, args []string, podEnv map[string]string, pod string) []string {
	t.Helper()
	values := map[string]string{}
	srvEnv := serverEnv(t)
	for k, v := range podEnv {
		switch {
		case v == "field:metadata.name":
			values[k] = pod
		case strings.HasPrefix(v, "secret:"):
			values[k] = srvEnv[k]
		default:
			values[k] = v
		}
	}
	var out []string
	for _, a := range args {
		out = append(out, k8sVar.ReplaceAllStringFunc(a, func(m string) string {
			v, ok := values[m[2:len(m)-1]]
			if !ok {
				t.Errorf("args reference %s, which the container's environment lacks", m)
			}
			return v
		}))
	}
	return out
}

var k8sVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// loadConfig loads a nats.conf with its auth.conf as nats-server does when started with
// args (nats-server's own flag handling, server.ConfigureOptions; the path after
// --config is replaced by the copy written here) in the environment environ, which
// the deployment gives it. Nil args mean --config nats.conf.
func loadConfig(t *testing.T, conf, auth string, args []string, environ map[string]string) *server.Options {
	t.Helper()
	setEnv(t, environ)
	dir := t.TempDir()
	for f, data := range map[string]string{"nats.conf": conf, "auth.conf": auth} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if args == nil {
		args = []string{"--config", "nats.conf"}
	}
	args = slices.Clone(args)
	for i := range args {
		if i > 0 && (args[i-1] == "--config" || args[i-1] == "-c") {
			args[i] = filepath.Join(dir, "nats.conf")
		}
	}
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts, err := server.ConfigureOptions(fs, args, func() {}, func() {}, func() {})
	if err != nil {
		t.Fatalf("nats-server %s: rejected: %v", strings.Join(args, " "), err)
	}
	// What nats-server checks next, before it listens: the options as a whole.
	checked := opts.Clone()
	checked.NoLog, checked.NoSigs = true, true
	s, err := server.NewServer(checked)
	if err != nil {
		t.Fatalf("nats-server %s: options rejected: %v", strings.Join(args, " "), err)
	}
	s.Shutdown()
	return opts
}

// checkScaling checks the autoscalers: KEDA triggers name the executor's consumers and
// read the monitoring port of the headless service; HPAs target existing Deployments.
func checkScaling(t *testing.T, docs []obj, ov overlay) {
	var scaled []obj
	for _, d := range docs {
		switch str(d, "kind") {
		case "ScaledObject":
			scaled = append(scaled, d)
		case "HorizontalPodAutoscaler":
			if find(docs, "Deployment", str(d, "spec", "scaleTargetRef", "name")) == nil {
				t.Errorf("HPA %s targets no Deployment", name(d))
			}
		}
	}
	if (len(scaled) > 0) != ov.keda {
		t.Fatalf("%d ScaledObjects, want KEDA = %v", len(scaled), ov.keda)
	}
	sts := find(docs, "StatefulSet", "nats")
	headless := str(sts, "spec", "serviceName")
	wantEndpoint := headless + "." + str(sts, "metadata", "namespace") + ".svc.cluster.local:8222"
	if svc := find(docs, "Service", headless); svc == nil || str(svc, "spec", "clusterIP") != "None" {
		t.Errorf("the StatefulSet's service %s is not headless", headless)
	}
	for _, so := range scaled {
		target := find(docs, "Deployment", str(so, "spec", "scaleTargetRef", "name"))
		if target == nil {
			t.Errorf("ScaledObject %s targets no Deployment", name(so))
			continue
		}
		if get(target, "spec", "replicas") != nil {
			t.Errorf("Deployment %s sets replicas, which fights KEDA on every apply", name(target))
		}
		if min, _ := get(so, "spec", "minReplicaCount").(int); min < 1 {
			t.Errorf("ScaledObject %s may scale to zero: the catalog entries of its tools would expire", name(so))
		}
		seen := map[string]bool{}
		for _, tr := range list(so, "spec", "triggers") {
			if str(tr, "type") != "nats-jetstream" {
				t.Errorf("ScaledObject %s: trigger %s, want nats-jetstream", name(so), str(tr, "type"))
				continue
			}
			md := get(tr, "metadata")
			stream := str(md, "stream")
			if streams := (events.Config{Shards: ov.shards}).CallStreams(); !slices.Contains(streams, stream) {
				t.Errorf("trigger stream %q, want one of %v", stream, streams)
			}
			cons := str(md, "consumer")
			tool := strings.TrimPrefix(cons, strings.TrimSuffix(events.ConsumerName("x"), "x"))
			if events.ValidateTool(tool) != nil || events.ConsumerName(tool) != cons {
				t.Errorf("trigger consumer %q is not events.ConsumerName(<tool>)", cons)
			}
			if seen[stream+"/"+cons] {
				t.Errorf("consumer %s on %s has two triggers", cons, stream)
			}
			seen[stream+"/"+cons] = true
			if a := str(md, "account"); a != "$G" {
				t.Errorf("trigger account %q: the users of auth.conf live in the global account $G", a)
			}
			if e := str(md, "natsServerMonitoringEndpoint"); e != wantEndpoint {
				t.Errorf("trigger endpoint %q, want %q (the headless service, whose name resolves to the pods that KEDA then asks by IP)", e, wantEndpoint)
			}
			if n, err := strconv.Atoi(str(md, "lagThreshold")); err != nil || n < 1 {
				t.Errorf("trigger %s: lagThreshold %q is not a positive integer", cons, str(md, "lagThreshold"))
			}
			if _, err := strconv.Atoi(str(md, "activationLagThreshold")); err != nil {
				t.Errorf("trigger %s: activationLagThreshold %q is not an integer", cons, str(md, "activationLagThreshold"))
			}
		}
	}
}

// The users' Secret: dev generates it; prod expects it to exist. Either way every key
// the pods read must be one the README tells operators to create.
func checkSecrets(t *testing.T, docs []obj, ov overlay) {
	readme := string(readFile(t, filepath.Join(repoRoot(t), "deploy", "k8s", "README.md")))
	for _, w := range workloads(docs) {
		for _, c := range containers(w) {
			for _, v := range list(c, "env") {
				ref := get(v, "valueFrom", "secretKeyRef")
				if ref == nil {
					continue
				}
				sn, key := str(ref, "name"), str(ref, "key")
				if !strings.Contains(readme, key) || !strings.Contains(readme, sn) {
					t.Errorf("%s reads %s/%s, which deploy/k8s/README.md does not tell operators to create", name(w), sn, key)
				}
				secret := find(docs, "Secret", sn)
				if ov.dir == "overlays/dev" && get(ref, "optional") != true {
					if secret == nil || get(secret, "data", key) == nil {
						t.Errorf("dev: %s reads %s/%s, which the overlay does not generate", name(w), sn, key)
					}
				}
			}
		}
	}
	if ov.dir != "overlays/dev" {
		return
	}
	// The dev overlay ships fixed hashes: each must be the hash of the plaintext the
	// parts (and people) log in with.
	plain, hashed := find(docs, "Secret", "toolfleet-nats-users"), find(docs, "Secret", "toolfleet-nats-server")
	for user := range passwords {
		pw, err1 := base64.StdEncoding.DecodeString(str(plain, "data", user))
		h, err2 := base64.StdEncoding.DecodeString(str(hashed, "data", user+"-bcrypt"))
		if err := errors.Join(err1, err2); err != nil || len(pw) == 0 || bcrypt.CompareHashAndPassword(h, pw) != nil {
			t.Errorf("dev: toolfleet-nats-server/%s-bcrypt is not the hash of toolfleet-nats-users/%s (%v)", user, user, err)
		}
	}
}
