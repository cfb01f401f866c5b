package executor

import "runtime"

// DefaultConcurrency is the calls of one tool a replica runs at once unless
// [WithConcurrency] says otherwise: 16 per core (GOMAXPROCS), at least 256.
//
// A replica must hold enough calls to cover a call's round trip (look-up, run, result
// stored, ack), or it idles while JetStream could deliver more: with 4, one replica on
// 16 cores took 9.9k calls/s where the server took 25k. Against nats-server processes
// (internal/testsupport/clustertest BenchmarkShards: two replicas, a window of 1,024 calls) the
// round trip is longer than against an embedded server, and the floor of 64 it had left
// the fleet about a fifth slower and about a sixth dearer in CPU per call than 256 on 2
// cores (fewer calls in hand means fewer messages per read and write, on both sides of
// each connection); 256 is also what the raw pattern there pulls per worker.
// BenchmarkFleetConcurrency shows the embedded case at 4, 16, 64 and 256. Tools that
// wait on I/O (most tools) gain the most from a high value; a CPU-bound tool is bounded
// by the cores either way, and the fleet-wide bound of a tool stays the consumer's max
// ack pending ([WithMaxAckPending]).
func DefaultConcurrency() int { return max(256, 16*runtime.GOMAXPROCS(0)) }
