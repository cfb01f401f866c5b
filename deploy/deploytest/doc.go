// Package deploytest proves that what deploy/ ships fits the code: the Kubernetes
// manifests, docker-compose.yml and the NATS permissions file are read and checked
// against pkg/events and internal/natsconn, and the permissions are loaded into a real
// nats-server that every part then uses under its own user.
//
// # What the tests check
//
// The manifest tests parse every YAML document under deploy/k8s and docker-compose.yml
// and fail when a name drifts from the code: a KEDA trigger whose stream or consumer is
// not what the executor creates ([events.StreamCalls], [events.ConsumerName]), an
// environment variable no binary reads, a probe on a port the container does not expose,
// a Deployment without resources, probes or a non-root security context, or a
// kustomization listing a file that does not exist.
//
// Every shipped NATS config (base, dev overlay, compose) is loaded with nats-server's
// own flag and config handling, from the container's command line and in the
// environment the deployment gives it (bcrypt hashes generated at run time), and the
// values that matter are asserted as parsed: sync interval, max payload, JetStream
// limits, the route user and routes, the users and their accounts.
//
// The permission tests start an embedded nats-server with JetStream configured by
// deploy/k8s/base/nats/auth.conf, the same file the cluster and docker-compose load, and
// drive real JetStream operations as each user: the executor ensures the streams,
// consumes a call and publishes its result; the planner publishes calls and reads results;
// the picker serves a NATS micro endpoint and watches the catalog; the client performs
// the API requests behind every nats command docs/deployment.md documents. Then they try what each
// user must not do, and require the server to refuse it with a permissions violation,
// subject by subject.
//
// The composer user (executors of tools files with composites) is parsed and compared
// with the executor user: the same list plus the sub-calls (and their cancels), nothing
// else. A real executor of a tools file with a composite, a cache and a callback service
// serves a tenant under it, and a composite canceled while its sub-call waits for an
// approval cancels the sub-call; under the plain executor user the same composite is
// refused its sub-call's result.
//
// The sharded overlay (overlays/sharded) is checked against pkg/events' shards: its
// nats.conf is the base's plus events.Config.MappingsConf for its number of shards (the
// mapping as parsed: one destination per shard, weights summing to 100), TOOLFLEET_SHARDS
// agrees, and KEDA has a trigger per tool and shard, summed by scalingModifiers. On a real
// server started from that config with the shipped users, calls published to the
// documented subject land in every shard under their own subject, an executor serves all
// shards, the whole fleet carries a run, and tenants reach their own calls and results on
// every shard and nothing of another's.
//
// A 3-node cluster is started from the shipped nats.conf, auth.conf and StatefulSet, and
// servers without the route password must be refused at the route port; with the
// documented route TLS turned on, servers without TLS too. The password-hash recipe of
// deploy/k8s/README.md is run as written (with htpasswd, when installed). docker-compose.yml
// is loaded with the compose-spec loader and run without Docker: each service's command
// line resolved as the compose specification says, the binaries built from this tree, a
// call published and its result read as docs/deployment.md shows.
//
// The monitoring (deploy/prometheus, components/prometheus) is checked three ways:
// promtool checks the alert rules and runs their unit tests; every overlay with the
// component is validated by kubeconform, strictly, against Kubernetes' OpenAPI v3 and
// the Prometheus Operator's and KEDA's CRDs (read from their Go modules, so offline once
// cached); and the real executor, picker and planner are run and scraped, and every
// series and label a rule or a dashboard panel names must be one they (or the NATS
// exporter and kube-state-metrics, listed) serve.
//
// Run them with:
//
//	go test ./deploy/...
package deploytest
