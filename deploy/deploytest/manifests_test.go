package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// Every YAML file under deploy/k8s parses, and every file a kustomization names exists.
func TestKustomizationsNameExistingFiles(t *testing.T) {
	k8s := filepath.Join(repoRoot(t), "deploy", "k8s")
	kustomizations := 0
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
		kustomizations++
		k, dir := docs[0], filepath.Dir(f)
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
	if kustomizations != 3 {
		t.Errorf("found %d kustomizations, want base, overlays/dev and overlays/prod", kustomizations)
	}
}

// overlay is one rendered kustomization and what it must look like.
type overlay struct {
	dir            string
	natsNodes      int
	streamReplicas int
	keda           bool
	syncAlways     bool
}

var overlays = []overlay{
	{dir: "overlays/dev", natsNodes: 1, streamReplicas: 1, keda: false, syncAlways: true},
	{dir: "overlays/prod", natsNodes: 3, streamReplicas: 3, keda: true, syncAlways: false},
}

// The rendered dev and prod overlays are consistent with the code and with each other.
func TestRenderedOverlays(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov.dir, func(t *testing.T) {
			docs := render(t, filepath.Join(repoRoot(t), "deploy", "k8s", ov.dir))
			checkWorkloads(t, docs)
			checkNATS(t, docs, ov)
			checkScaling(t, docs, ov)
			checkSecrets(t, docs, ov)
		})
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

// env returns a container's environment: literal values, and "secret:<name>/<key>" or
// "field:<path>" for references.
func env(c obj) map[string]string {
	e := map[string]string{}
	for _, v := range list(c, "env") {
		n := str(v, "name")
		switch {
		case get(v, "valueFrom", "secretKeyRef") != nil:
			e[n] = "secret:" + str(v, "valueFrom", "secretKeyRef", "name") + "/" + str(v, "valueFrom", "secretKeyRef", "key")
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
			if p := str(c, probe, "httpGet", "path"); p != "" && !code.servesPath(p) {
				t.Errorf("%s: %s asks %s, which cmd/%s does not serve", cn, probe, p, bin)
			}
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

// checkNATS checks the NATS StatefulSet against its config: node count, the generated
// ConfigMap (auth.conf byte for byte, a config nats-server loads, the durability
// choice), and that every variable the config names is in the pod's environment.
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
	podEnv := env(containers(sts)[0])
	for _, m := range envRef.FindAllStringSubmatch(conf+auth, -1) {
		if _, ok := podEnv[m[1]]; !ok && !strings.Contains(auth, m[1]+" =") {
			t.Errorf("the NATS config reads $%s, which the pod's environment lacks", m[1])
		}
	}
	if !strings.Contains(conf, "\n  sync_interval:") {
		t.Error("nats.conf must state sync_interval explicitly")
	}
	opts := loadConfig(t, conf, auth, map[string]string{"POD_NAME": "nats-0"})
	if opts.SyncAlways != ov.syncAlways {
		t.Errorf("sync_interval always = %v, want %v", opts.SyncAlways, ov.syncAlways)
	}
	if (len(opts.Routes) > 0) != (ov.natsNodes > 1) {
		t.Errorf("%d cluster routes for %d nodes", len(opts.Routes), ov.natsNodes)
	}
	for _, r := range opts.Routes {
		host := r.Hostname() // nats-<i>.<headless service>
		i, svc, _ := strings.Cut(host, ".")
		if svc != str(sts, "spec", "serviceName") || !strings.HasPrefix(i, "nats-") {
			t.Errorf("route %s is not a pod of the StatefulSet's service %s", host, str(sts, "spec", "serviceName"))
		}
	}
	if opts.ServerName != "nats-0" {
		t.Errorf("server_name is %q, want the pod name (KEDA finds a consumer's leader by it)", opts.ServerName)
	}
	// Every part logs in as a user of auth.conf, with the password the server is given
	// for that user.
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
			want := podEnv["TOOLFLEET_"+strings.ToUpper(user)+"_PASSWORD"]
			if e["TOOLFLEET_NATS_PASSWORD"] != want {
				t.Errorf("%s: password %s, but the server checks %q against %s", name(w), e["TOOLFLEET_NATS_PASSWORD"], user, want)
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

// loadConfig loads a nats.conf with its auth.conf as nats-server -c would.
func loadConfig(t *testing.T, conf, auth string, environ map[string]string) *server.Options {
	t.Helper()
	for user, pw := range passwords {
		t.Setenv("TOOLFLEET_"+strings.ToUpper(user)+"_PASSWORD", pw)
	}
	for k, v := range environ {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	for f, data := range map[string]string{"nats.conf": conf, "auth.conf": auth} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("nats-server rejects the config: %v", err)
	}
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
			if s := str(md, "stream"); s != events.StreamCalls {
				t.Errorf("trigger stream %q, want %s", s, events.StreamCalls)
			}
			cons := str(md, "consumer")
			tool := strings.TrimPrefix(cons, strings.TrimSuffix(events.ConsumerName("x"), "x"))
			if events.ValidateTool(tool) != nil || events.ConsumerName(tool) != cons {
				t.Errorf("trigger consumer %q is not events.ConsumerName(<tool>)", cons)
			}
			if seen[cons] {
				t.Errorf("consumer %s has two triggers", cons)
			}
			seen[cons] = true
			if a := str(md, "account"); a != "$G" {
				t.Errorf("trigger account %q: the users of auth.conf live in the global account $G", a)
			}
			if e := str(md, "natsServerMonitoringEndpoint"); e != wantEndpoint {
				t.Errorf("trigger endpoint %q, want %q (the headless service, so KEDA can ask the consumer leader)", e, wantEndpoint)
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
}
