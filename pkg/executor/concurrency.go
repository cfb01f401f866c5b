package executor

import "runtime"

// DefaultConcurrency is the calls of one tool a replica runs at once unless
// [WithConcurrency] says otherwise: 16 per core (GOMAXPROCS), at least 64.
//
// A replica must hold enough calls to cover a call's round trip (look-up, run, result
// stored, ack), or it idles while JetStream could deliver more: with 4, one replica on
// 16 cores took 9.9k calls/s where the server took 25k. The fleet benchmark
// (BenchmarkFleetConcurrency) shows the throughput at 4, 16, 64 and 256 against the raw
// pattern: on a shared 2-core machine, one replica at 256 calls in flight took a median
// 1.3-1.4k calls/s with 4 and 2.0-3.0k with 16, 64 (the default there) or 256 (7 to 12
// interleaved runs; with 2 cores the fleet is CPU-bound from 16 on, so more only helps
// with more cores, which the per-core default follows). Tools that wait on I/O (most tools) gain the most from a high value; a
// CPU-bound tool is bounded by the cores either way, and the fleet-wide bound of a tool
// stays the consumer's max ack pending ([WithMaxAckPending]).
func DefaultConcurrency() int { return max(64, 16*runtime.GOMAXPROCS(0)) }
