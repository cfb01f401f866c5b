package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// routeHost is a route's address in the StatefulSet's arguments: nats-<i>.<service>:6222.
var routeHost = regexp.MustCompile(`@nats-(\d+)\.nats-headless:6222`)

// The production cluster, started from the shipped files — base/nats/nats.conf,
// auth.conf and the StatefulSet's command line and environment — forms with its
// authenticated routes and runs JetStream with 3 replicas; a server that reaches the
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
	root := repoRoot(t)
	base := filepath.Join(root, "deploy", "k8s", "base", "nats")
	conf := string(readFile(t, filepath.Join(base, "nats.conf")))
	auth := string(readFile(t, filepath.Join(base, "auth.conf")))
	docs := decodeAll(t, "statefulset.yaml", readFile(t, filepath.Join(base, "statefulset.yaml")))
	natsC := containers(docs[0])[0]
	var args []string
	for _, a := range list(natsC, "args") {
		args = append(args, fmt.Sprint(a))
	}
	podEnv := env(natsC)

	const nodes = 3
	clusterPorts := make([]int, nodes)
	for i := range clusterPorts {
		clusterPorts[i] = freePort(t)
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
	waitUntil(t, "a full mesh of routes", func() bool {
		for _, s := range servers {
			if s.NumRemotes() != nodes-1 {
				return false
			}
		}
		return true
	})

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
	waitUntil(t, "the toolfleet streams with 3 replicas", func() bool {
		// Until the nodes elect a meta leader, JetStream requests go unanswered.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return events.Ensure(ctx, executor.js, cfg) == nil
	})
	if info, err := executor.js.Stream(ctx, events.StreamCalls); err != nil || info.CachedInfo().Config.Replicas != nodes {
		t.Fatalf("calls stream: %v", err)
	}

	// Outsiders at node 0's route port: no credentials, the wrong password.
	refusals := &authLog{}
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
	waitUntil(t, "node 0 refusing both outsiders", func() bool { return refusals.count() >= 2 })

	client := connectTo(t, servers[2], "client")
	publishCalls := func(n int) {
		t.Helper()
		for i := range n {
			id := fmt.Sprintf("outsider-%d-%d", time.Now().UnixNano(), i)
			msg, err := events.NewCall("/client", id, "run-outsider", events.Call{Tool: "echo", Arguments: []byte(`{}`)})
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
	waitUntil(t, "the outsider with the route password joining", func() bool { return insider.NumRemotes() > 0 })
	waitUntil(t, "the calls reaching a server that joined", func() bool {
		publishCalls(1)
		m, err := insiderSub.NextMsg(100 * time.Millisecond)
		return err == nil && strings.HasPrefix(m.Subject, "toolfleet.call.")
	})
}

// connectTo logs in to s as user.
func connectTo(t *testing.T, s *server.Server, user string) *client {
	return (&authServer{srv: s}).connect(t, user)
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// authLog is a nats-server logger that counts authentication failures.
type authLog struct{ fails atomic.Int64 }

func (l *authLog) note(format string, v ...any) {
	if strings.Contains(strings.ToLower(fmt.Sprintf(format, v...)), "authentication error") {
		l.fails.Add(1)
	}
}
func (l *authLog) count() int64                    { return l.fails.Load() }
func (l *authLog) Noticef(format string, v ...any) { l.note(format, v...) }
func (l *authLog) Warnf(format string, v ...any)   { l.note(format, v...) }
func (l *authLog) Fatalf(format string, v ...any)  { l.note(format, v...) }
func (l *authLog) Errorf(format string, v ...any)  { l.note(format, v...) }
func (l *authLog) Debugf(format string, v ...any)  { l.note(format, v...) }
func (l *authLog) Tracef(format string, v ...any)  { l.note(format, v...) }
