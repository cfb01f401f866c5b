// Package clustertest proves toolfleet's recovery on a real 3-node NATS JetStream
// cluster, the production shape: R3 streams, several executor replicas, and an outside
// client loading the fleet with calls while nodes die and restart.
//
// Its test (TestClusterFaults) starts three nats-server processes, built from the
// nats-server module this repository pins, so that a node can be killed with SIGKILL —
// an embedded server's Shutdown hands its leaderships over first, which a crash does
// not. While a steady load of calls of an idempotent and a non-idempotent tool runs, it
// kills the node leading the calls stream and restarts it later, then restarts all three
// nodes one by one (SIGTERM). It proves that:
//
//   - executors started together on a fresh cluster come up (their setup is retried
//     until the cluster has formed);
//   - every call ends with exactly one stored result, and no call that ran is answered
//     interrupted (results are published with retries that outlast an election);
//   - no tool stalls longer than the election that a fault caused plus 2s (consumers
//     notice a lost leader within a second).
//
// It logs, to be quoted: calls/s before, during and after the faults, each fault's
// election time and the time until each tool was served again:
//
//	go test -run ClusterFaults -v ./internal/testsupport/clustertest/
//
// It takes one to two minutes on two cores; -short skips it.
package clustertest
