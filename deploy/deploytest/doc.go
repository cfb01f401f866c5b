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
// The permission tests start an embedded nats-server with JetStream configured by
// deploy/k8s/base/nats/auth.conf, the same file the cluster and docker-compose load, and
// drive real JetStream operations as each user: the executor ensures the streams,
// consumes a call and publishes its result; the planner publishes calls and reads results;
// the picker serves a NATS micro endpoint and watches the catalog. Then they try what each
// user must not do, and require the server to refuse it with a permissions violation.
//
// Run them with:
//
//	go test ./deploy/...
package deploytest
