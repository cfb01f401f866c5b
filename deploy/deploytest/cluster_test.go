package deploytest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/internal/testsupport/nettest"
	"github.com/toolfleet/toolfleet/pkg/events"
)

// routeHost is a route's address in the StatefulSet's arguments: nats-<i>.<service>:6222.
var routeHost = regexp.MustCompile(`@nats-(\d+)\.nats-headless:6222`)

// The production cluster, started from the shipped files — base/nats/nats.conf,
// auth.conf and the StatefulSet's command line and environment — forms with its
// authenticated routes and runs JetStream with 3 replicas, and KEDA's triggers find
// their consumers and lag on it as KEDA reads them; a server that reaches the
// route port without the route password, or with a wrong one, is refused, never joins,
// and a subscriber on it sees none of the client's calls. A server given the password
// does join and does see them: the password, not the test, is what keeps the others out.
//
// Rewritten for one host, and nothing else: the client, cluster and monitoring ports
// (free ports on 127.0.0.1 instead of 4222/6222/8222 on every interface), the route
// hosts (nats-<i>.nats-headless becomes 127.0.0.1:<that node's cluster port>), the
// store directory and the pid file.
func TestClusterRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	base := filepath.Join(repoRoot(t), "deploy", "k8s", "base", "nats")
	servers, clusterPorts := startCluster(t, string(readFile(t, filepath.Join(base, "nats.conf"))))
	// KEDA's way to every node (deploy/k8s/README.md, "Scaling"): /varz lists each
	// node's client address in connect_urls, and each node's /varz names it.
	for _, s := range servers {
		var varz struct {
			ServerName  string   `json:"server_name"`
			ConnectURLs []string `json:"connect_urls"`
		}
		resp, err := http.Get("http://" + s.MonitorAddr().String() + "/varz")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&varz)
		resp.Body.Close()
		if err != nil || varz.ServerName != s.Name() || len(varz.ConnectURLs) != nodes {
			t.Errorf("%s /varz: server_name %q, connect_urls %v (%v); KEDA needs the name and every node's address",
				s.Name(), varz.ServerName, varz.ConnectURLs, err)
		}
	}

	// JetStream with 3 replicas, as the prod overlay runs it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	executor := connectTo(t, servers[1], "executor")
	cfg := events.Config{Replicas: nodes}
	natstest.Eventually(t, 30*time.Second, "the toolfleet streams with 3 replicas", func() bool {
		// Until the nodes elect a meta leader, JetStream requests go unanswered.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return jsutil.Ensure(ctx, executor.js, cfg) == nil
	})
	if info, err := executor.js.Stream(ctx, events.StreamCalls); err != nil || info.CachedInfo().Config.Replicas != nodes {
		t.Fatalf("calls stream: %v", err)
	}
	checkKEDALag(ctx, t, servers, executor, cfg)

	// Outsiders at node 0's route port: no credentials, the wrong password.
	refusals := &lineLog{}
	servers[0].SetLogger(refusals, false, false)
	routeURL := fmt.Sprintf("127.0.0.1:%d", clusterPorts[0])
	outsider := func(userinfo string) (*server.Server, *nats.Subscription) {
		opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "toolfleet", Host: "127.0.0.1", Port: -1},
			Routes:  server.RoutesFromStr("nats://" + userinfo + routeURL)}
		s := startServer(t, opts)
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		sub, err := nc.SubscribeSync(">")
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		return s, sub
	}
	anonymous, anonSub := outsider("")
	wrong, wrongSub := outsider("route:not-the-password@")
	natstest.Eventually(t, 30*time.Second, "node 0 refusing both outsiders", func() bool { return refusals.count("authentication error") >= 2 })

	client := connectTo(t, servers[2], "client")
	publishCalls := func(n int) {
		t.Helper()
		for i := range n {
			id := fmt.Sprintf("outsider-%d-%d", time.Now().UnixNano(), i)
			msg, err := events.NewCall(events.CallOptions{Source: "/client", ID: id, RunID: "run-outsider"}, events.Call{Tool: "echo", Arguments: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.js.PublishMsg(ctx, msg); err != nil {
				t.Fatalf("client: publish call: %v", err)
			}
		}
	}
	publishCalls(20)
	for name, s := range map[string]*server.Server{"without credentials": anonymous, "with a wrong password": wrong} {
		if s.NumRemotes() != 0 {
			t.Errorf("a server %s joined the cluster (%d routes)", name, s.NumRemotes())
		}
	}
	for _, s := range servers {
		if s.NumRemotes() != nodes-1 {
			t.Errorf("%s has %d remotes, want only the other %d nodes", s.Name(), s.NumRemotes(), nodes-1)
		}
	}
	for name, sub := range map[string]*nats.Subscription{"without credentials": anonSub, "with a wrong password": wrongSub} {
		if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Errorf("a subscriber on a server %s received %s", name, m.Subject)
		}
	}

	// The control: the same outsider given the route password joins and sees the calls.
	insider, insiderSub := outsider("route:" + routePassword + "@")
	natstest.Eventually(t, 30*time.Second, "the outsider with the route password joining", func() bool { return insider.NumRemotes() > 0 })
	natstest.Eventually(t, 30*time.Second, "the calls reaching a server that joined", func() bool {
		publishCalls(1)
		m, err := insiderSub.NextMsg(100 * time.Millisecond)
		return err == nil && strings.HasPrefix(m.Subject, "toolfleet.call.")
	})
}

// nodes is the size of the production cluster.
const nodes = 3

// startCluster starts the production cluster on this host from conf (base/nats/nats.conf
// or a variant of it), auth.conf and the StatefulSet's args and environment, rewriting
// only ports, route hosts, the store and the pid file, and waits for a full mesh. It
// returns the servers and their cluster ports.
func startCluster(t *testing.T, conf string) ([]*server.Server, []int) {
	t.Helper()
	base := filepath.Join(repoRoot(t), "deploy", "k8s", "base", "nats")
	auth := string(readFile(t, filepath.Join(base, "auth.conf")))
	docs := decodeAll(t, "statefulset.yaml", readFile(t, filepath.Join(base, "statefulset.yaml")))
	natsC := containers(docs[0])[0]
	var args []string
	for _, a := range list(natsC, "args") {
		args = append(args, fmt.Sprint(a))
	}
	podEnv := env(natsC)

	clusterPorts := make([]int, nodes)
	for i := range clusterPorts {
		clusterPorts[i] = nettest.FreePort(t)
	}
	var servers []*server.Server
	for i := range nodes {
		pod := "nats-" + strconv.Itoa(i)
		podArgs := expandArgs(t, args, podEnv, pod)
		for j, a := range podArgs {
			podArgs[j] = routeHost.ReplaceAllStringFunc(a, func(m string) string {
				n, _ := strconv.Atoi(routeHost.FindStringSubmatch(m)[1])
				return "@127.0.0.1:" + strconv.Itoa(clusterPorts[n])
			})
		}
		environ := serverEnv(t)
		environ["POD_NAME"] = pod
		opts := loadConfig(t, conf, auth, podArgs, environ)
		if len(opts.Routes) != nodes {
			t.Fatalf("%s: %d routes from %q", pod, len(opts.Routes), podArgs)
		}
		opts.Host, opts.Port = "127.0.0.1", -1
		opts.HTTPHost, opts.HTTPPort = "127.0.0.1", -1
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", clusterPorts[i]
		opts.StoreDir, opts.PidFile = t.TempDir(), ""
		servers = append(servers, startServer(t, opts))
	}
	natstest.Eventually(t, 30*time.Second, "a full mesh of routes", func() bool {
		for _, s := range servers {
			if s.NumRemotes() != nodes-1 {
				return false
			}
		}
		return true
	})
	return servers, clusterPorts
}

// connectTo logs in to s as user.
func connectTo(t *testing.T, s *server.Server, user string) *client {
	return (&authServer{srv: s}).connect(t, user)
}

// The route TLS that deploy/k8s/README.md documents ("Route TLS"): with the tls block of
// base/nats/nats.conf uncommented and a certificate at its paths, the production
// cluster forms over TLS; a server with the route password but without TLS is refused,
// and one with both joins.
func TestClusterRouteTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	dir := t.TempDir()
	writeRouteCerts(t, dir)
	conf := uncommentTLS(t, string(readFile(t, filepath.Join(repoRoot(t), "deploy", "k8s", "base", "nats", "nats.conf"))), dir)
	servers, clusterPorts := startCluster(t, conf)
	if servers[0].ClusterAddr() == nil {
		t.Fatal("no cluster listener")
	}

	logs := &lineLog{}
	servers[0].SetLogger(logs, false, false)
	joiner := func(withTLS bool) *server.Server {
		opts := &server.Options{Host: "127.0.0.1", Port: -1,
			Cluster: server.ClusterOpts{Name: "toolfleet", Host: "127.0.0.1", Port: -1},
			Routes:  server.RoutesFromStr(fmt.Sprintf("nats://route:%s@127.0.0.1:%d", routePassword, clusterPorts[0]))}
		if withTLS {
			tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: filepath.Join(dir, "tls.crt"),
				KeyFile: filepath.Join(dir, "tls.key"), CaFile: filepath.Join(dir, "ca.crt"), Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			tc.RootCAs = tc.ClientCAs // a route is client and server both, as nats-server sets it up
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = tc, 3
		}
		return startServer(t, opts)
	}
	plain := joiner(false)
	natstest.Eventually(t, 30*time.Second, "node 0 refusing a route without TLS", func() bool { return logs.count("tls handshake failure") > 0 })
	if plain.NumRemotes() != 0 {
		t.Errorf("a server without TLS joined the cluster (%d routes)", plain.NumRemotes())
	}
	secure := joiner(true)
	natstest.Eventually(t, 30*time.Second, "a server with TLS and the route password joining", func() bool { return secure.NumRemotes() > 0 })
}

// uncommentTLS turns on the commented tls block inside nats.conf's cluster block, with
// its files in dir instead of /etc/nats/tls.
func uncommentTLS(t *testing.T, conf, dir string) string {
	t.Helper()
	start := strings.Index(conf, "  # tls {\n")
	if start < 0 {
		t.Fatal("nats.conf has no commented tls block in its cluster block")
	}
	end := start + strings.Index(conf[start:], "  # }\n") + len("  # }\n")
	block := strings.ReplaceAll(conf[start:end], "  # ", "  ")
	block = strings.ReplaceAll(block, "/etc/nats/tls/", filepath.ToSlash(dir)+"/")
	return conf[:start] + block + conf[end:]
}

// writeRouteCerts writes ca.crt, and tls.crt and tls.key for the names the README asks
// for plus 127.0.0.1, into dir.
func writeRouteCerts(t *testing.T, dir string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toolfleet-nats-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{"*.nats-headless", "*.nats-headless.toolfleet.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: leafDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// lineLog is a nats-server logger that keeps every line, lower-cased.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.ToLower(fmt.Sprintf(format, v...)))
}

// count is the number of lines that mention s.
func (l *lineLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *lineLog) Noticef(format string, v ...any) { l.add(format, v...) }
func (l *lineLog) Warnf(format string, v ...any)   { l.add(format, v...) }
func (l *lineLog) Fatalf(format string, v ...any)  { l.add(format, v...) }
func (l *lineLog) Errorf(format string, v ...any)  { l.add(format, v...) }
func (l *lineLog) Debugf(format string, v ...any)  { l.add(format, v...) }
func (l *lineLog) Tracef(format string, v ...any)  { l.add(format, v...) }

// jsz is the part of a node's /jsz?acc=<account>&consumers=true&config=true that KEDA's
// nats-jetstream scaler reads (the node's name it takes from /varz).
type jsz struct {
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name      string `json:"name"`
			Consumers []struct {
				Name       string `json:"name"`
				NumPending uint64 `json:"num_pending"`
				Cluster    struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// checkKEDALag follows every trigger of base/executor/scaledobject.yaml the way KEDA
// does on the real cluster: with the executor's consumers made and one call waiting,
// each node's /jsz for the trigger's account must show the trigger's stream and
// consumer with its leader, and the leader must count the waiting call.
func checkKEDALag(ctx context.Context, t *testing.T, servers []*server.Server, executor *client, cfg events.Config) {
	t.Helper()
	so := decodeAll(t, "scaledobject.yaml", readFile(t, filepath.Join(repoRoot(t), "deploy", "k8s", "base", "executor", "scaledobject.yaml")))[0]
	triggers := list(so, "spec", "triggers")
	if len(triggers) == 0 {
		t.Fatal("the ScaledObject has no triggers")
	}
	prefix := strings.TrimSuffix(events.ConsumerName("x"), "x")
	for _, tr := range triggers {
		tool := strings.TrimPrefix(str(tr, "metadata", "consumer"), prefix)
		cc, err := cfg.CallConsumer(tool)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := executor.js.CreateOrUpdateConsumer(ctx, events.StreamCalls, cc); err != nil {
			t.Fatalf("executor: consumer of %s: %v", tool, err)
		}
	}
	waiting := strings.TrimPrefix(str(triggers[0], "metadata", "consumer"), prefix)
	call, err := events.NewCall(events.CallOptions{Source: "/client", ID: "keda-1", RunID: "keda-run"}, events.Call{Tool: waiting, Arguments: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	client := connectTo(t, servers[0], "client")
	if _, err := client.js.PublishMsg(ctx, call); err != nil {
		t.Fatalf("client: publish call: %v", err)
	}

	for _, tr := range triggers {
		md := get(tr, "metadata")
		account, stream, consumer := str(md, "account"), str(md, "stream"), str(md, "consumer")
		want := uint64(0)
		if consumer == events.ConsumerName(waiting) {
			want = 1
		}
		natstest.Eventually(t, 30*time.Second, "KEDA's view of "+consumer, func() bool {
			for _, s := range servers {
				var z jsz
				resp, err := http.Get("http://" + s.MonitorAddr().String() + "/jsz?acc=" + url.QueryEscape(account) + "&consumers=true&config=true")
				if err != nil {
					return false
				}
				err = json.NewDecoder(resp.Body).Decode(&z)
				resp.Body.Close()
				if err != nil {
					return false
				}
				for _, a := range z.Accounts {
					for _, st := range a.Streams {
						for _, c := range st.Consumers {
							if a.Name == account && st.Name == stream && c.Name == consumer &&
								c.Cluster.Leader == s.Name() && c.NumPending == want {
								return true
							}
						}
					}
				}
			}
			return false
		})
	}
}
