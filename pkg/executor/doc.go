// Package executor is the library executor binaries are built with: it takes the calls
// of the tools in a [tools.Registry] from JetStream, validates and runs them, and
// publishes their results, with the guarantees of toolfleet's design — no call lost, no
// result doubled, bad input always answered.
//
// # Running an executor
//
//	reg := tools.NewRegistry()
//	tools.MustAdd[GetWeather](reg)
//
//	ex, err := executor.New(nc, reg, executor.WithConcurrency(8), executor.WithLogger(log))
//	if err != nil {
//		return err
//	}
//	return ex.Run(ctx) // blocks; when ctx ends it stops taking calls and finishes the ones in flight
//
// Run ensures the streams (see [events.Ensure]), keeps the served definitions in the
// catalog, and consumes each tool's calls from the tool's durable pull consumer
// ([events.ConsumerName]). Every replica serving a tool shares that consumer, so adding
// replicas adds throughput with no coordination; [WithConcurrency] bounds a tool's calls
// on one replica, [WithMaxAckPending] across the fleet.
//
// # One call
//
// A delivered call is decoded ([events.DecodeCall]), hydrated ([tools.Registry.Hydrate]:
// parse, validate, instantiate), gated by approval when the tool needs one, run with its
// timeout (and the call's deadline), retried per the tool's [tools.RetryPolicy] with
// backoff and jitter, and answered with an [events.Result] on
// toolfleet.result.<run>.<call>. While it runs, in-progress acks keep JetStream from
// handing it to another replica.
//
// # Acknowledgement
//
// The result is published asynchronously and the call is acked when the result's PubAck
// arrives — never before, so a crash in between means a redelivery, not a lost call. The
// result's Nats-Msg-Id is the call id, so a redelivered call's second result is dropped
// by JetStream. Publishing and then acking on the PubAck was the fastest safe pattern
// measured (cheaper than publish-then-AckSync).
//
// # Tools that must not run twice
//
// A tool whose definition says Idempotent: false is never retried, and before it runs a
// marker keyed by the call id is created in the toolfleet-inflight bucket. If the call is
// delivered again (its executor crashed or was stopped mid-call), the marker is found and
// the caller gets an interrupted result instead of a second run.
//
// # Approvals
//
// A call of an unsafe tool (Safe: false, or no schema with noSchemaMode human-approval)
// is parked: stored in the toolfleet-approvals bucket, announced with an approval request
// event on toolfleet.event.approval.requested.<tool>.<call>, and the call message is
// acked. No slot is held while a human thinks, and nothing is lost when executors
// restart. An answer published on the request's AnswerSubject — approve, deny, or
// approve with replacement arguments (validated again) — is consumed by any replica
// serving the tool, which carries it out. A call whose approval does not come within
// [WithApprovalTimeout] (or its own deadline) is denied.
//
// # Bad input
//
// Malformed arguments and schema violations are answered invalid with every violation;
// an event that is not a valid call (not JSON, missing or wrong type, oversized) is
// answered invalid_event or input_too_large; a panicking tool is answered tool_panic. A
// message without a usable call id cannot be answered and goes to
// toolfleet.dlq.<tool> with the reason. A call delivered MaxDeliver times without
// completing is dead-lettered on its last delivery, and its caller gets an error result.
// Calls of a tool that no executor serves (no catalog entry) are answered no_such_tool
// once older than [WithNoSuchToolTimeout], by a janitor every replica runs.
//
// # Shutdown
//
// When Run's context ends, the executor stops taking calls and hands back the ones
// buffered; calls in flight may finish within [WithGracePeriod]; then they are cancelled
// and handed back (Nak) for another replica. Run waits for results being published and
// returns nil.
//
// # Metrics
//
// [WithMetrics] registers Prometheus collectors: calls by tool and status, duration
// histogram, calls in flight, retries, redeliveries, dead letters and approvals.
package executor
