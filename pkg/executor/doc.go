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
// Run ensures the streams and buckets of its [events.Config], keeps the served
// definitions in the catalog, and consumes each tool's calls from the tool's durable pull consumer
// ([events.ConsumerName]). Every replica serving a tool shares that consumer, so adding
// replicas adds throughput with no coordination; [WithConcurrency] bounds a tool's calls
// on one replica, [WithMaxAckPending] across the fleet.
//
// The default concurrency, [DefaultConcurrency], is 16 calls per core (GOMAXPROCS), at
// least 256: a replica must hold enough calls to cover each call's round trip (look-up,
// run, result stored, ack) or it idles while the stream could deliver more — with the
// old default of 4, one replica on 16 cores took 9.9k calls/s of a server's 25k. See
// BenchmarkFleetConcurrency for the throughput at 4, 16, 64 and 256. Calls are handled
// on goroutines that are reused while calls keep coming (handlers.go).
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
// # Pulling: no call held here is redelivered
//
// A replica holds only the calls it keeps in progress, whether they run or wait: a call
// held by a live executor is never delivered again, however long it runs or waits. Each
// consumer of a tool is pulled with Fetch, one pull at a time, for the tool's free
// places on this replica plus a short reserve (its share of them when calls are
// sharded), and every call a pull brings is taken at once: it runs, or waits for a place
// with in-progress acks from its delivery on. The reserve is as many calls as finish in
// about 10ms at the recent rate (at most the concurrency): short calls find the next one
// ready when a place frees, as they did with nats.go's buffer, and a slow tool's calls
// do not wait on a busy replica while another could start them. A consumer that may ask
// for nothing keeps one call in hand (so the approval answers and every shard are served
// even with fewer places than consumers), and a call waiting for a fleet-wide limit
// lends its place meanwhile.
//
// A server that falls behind can still deliver a call again while this replica holds
// it: it takes the in-progress acks after the ack wait has run out. The replica knows
// the calls it holds (by stream and sequence) and does not take such a copy: it keeps it
// in progress and lets the holder's ack settle the call. Taken, the copy would run the
// tool again, and each such delivery counts toward the max deliver, past which a call
// that ran is answered an error and set aside as a dead letter.
//
// nats.go's Consume was used before: it buffers up to its PullMaxMessages in the client
// and calls its callback one message at a time, so calls buffered behind a callback
// waiting for a slot had no in-progress ack and were delivered again after the ack wait
// while they waited or ran here (an idempotent call ran twice, a non-idempotent one was
// answered interrupted). See slots.go for the choice and what it costs; BenchmarkFleet
// measures it against the raw pattern.
//
// # Acknowledgement and once-only answers
//
// The result is published asynchronously and the call is acked when the result's PubAck
// arrives — never before, so a crash in between means a redelivery, not a lost call.
// Publishing and then acking on the PubAck was the fastest safe pattern measured (cheaper
// than publish-then-AckSync).
//
// Acks, naks, terms and in-progress acks are sent without waiting for an answer, and
// their errors are dropped (`_ = msg.Ack()`): nothing can be done about one that is lost
// but what the server does anyway — it delivers the message again after the ack wait —
// and a message delivered again is handled as every redelivery is: its stored result is
// found, a call held here is not taken twice.
//
// A finished call's result that cannot be stored yet — no responders or no PubAck (each
// publish waits 3s at most) while the results stream elects a leader, a server
// restarting — is published again, with the same id (never stored twice), waiting 100ms
// doubling to 1s between tries, for one ack wait or until the call's deadline when that
// is later (at most 5 minutes), and the call is kept alive with in-progress acks
// meanwhile. A server that is only slow — connected, its window of unacknowledged
// publishes full (the publish waits for room) or its PubAck later than 3s — is waited
// for the 5 minutes whatever the call's limits. So a leader election (seconds) or a
// server behind on its disk never turns a call that ran into a redelivery: an idempotent
// call does not run again and a non-idempotent one is not answered interrupted. Only
// when that window is over, or the executor's grace period at shutdown, is the call
// handed back. A call delivered its max deliver times is answered an error only when
// the look-up says it has no result; a look-up the server did not answer in time hands
// it back instead.
//
// A call is answered once for as long as its result is kept, not only within JetStream's
// duplicate window: the result is stored only on a subject that has none (see
// [events.NewResult]; a refused second result means "answered already", and the call is
// acked). Before running a call that may have a result — a redelivery, a non-idempotent
// or approval-gated call, any call when calls are sharded — the executor also looks for
// its stored result: a call redelivered after its executor paused past the ack wait, or
// re-published by its caller much later, is acked without running. An idempotent call's
// first delivery from a single calls stream is not looked up (tools run at least once):
// re-published after the duplicate window, it runs again and its second result is
// refused, so one result is stored (a core subscriber sees the refused one go by too).
// The look-ups of concurrent calls are coalesced into one multi-subject direct get,
// which keeps their cost under a tenth of the fleet's throughput: against nats-server
// processes on 2 cores, with 1,024 calls in flight, one request answered 18 calls on
// average (0.06 requests per call).
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
// A call of a tool that needs an approval is parked: an unsafe tool (Safe: false), one
// without a schema under noSchemaMode human-approval, or one that declares itself
// read-only where its runner cannot confine it to reads (a POST HTTP tool, an MCP tool
// without readOnlyHint: see [tools.Registry.ApprovalReason], whose reason the request
// carries). It is stored in the toolfleet-approvals bucket, announced with an approval request
// event on toolfleet.event.approval.requested.<tool>.<call>, and the call message is
// acked. No slot is held while a human thinks, and nothing is lost when executors
// restart. An answer published on the request's AnswerSubject — approve, deny, or
// approve with replacement arguments (validated again) — is consumed by any replica
// serving the tool, which carries it out if its answerer may act on the call: the rule
// the planner's API applies too ([events.MayAct]), with the answerer read from the
// answer's subject — the call's owner's role, or one of the fleet's operator roles
// ([WithOperatorRoles]) of its tenant, and only a role that may call the tool itself.
// Any other answer is refused: the call keeps waiting, and the refusal is logged at
// warn (actor and owner), counted (refused_acts_total) and recorded as an act_refused
// event on the call's run ([events.RunActRefused]). A call whose approval does not come
// within [WithApprovalTimeout] (or its own deadline) is denied.
//
// The first answer wins. Every answer to a call has the same event id
// ([events.ApprovalAnswerID]), so JetStream drops a second one within its duplicate
// window; beyond it, the replica carrying out an answer claims the parked entry by
// compare-and-set and later answers find it claimed or gone. An expiry claims the entry
// the same way, so an answer arriving at the deadline cannot run beside the denial. The
// result records the decision in [events.Result].Approval: decision, approver (the
// answerer its subject names, tenant/role or "anonymous"; what the answer's by said is
// kept as ClaimedBy), reason, time, and the original and approved arguments when an
// approval replaced them; an expired approval is recorded as [events.DecisionExpired].
//
// # Policy hooks
//
// [WithPolicyHook] (a tools file's policyHook) names a service the executor asks about
// each call of a tool, whoever published it, after the call is validated and before it
// is parked for approval or run: an [events.PolicyRequest] (level "tool") answered allow,
// deny or modify within the hook's timeout. A deny is the call's one result (status
// denied, the hook's reason); modified arguments are validated again (invalid: the call
// is refused with the validator's messages) and are what the approver sees and what
// runs. No usable answer in time is the hook's onError, deny (the default) or allow. The
// decision is recorded in [events.Result].Policy and kept with a parked call; the call is
// kept in progress while the hook thinks.
//
// # Cancels
//
// A cancel of a call ([events.NewCancel], [events.CancelSubject]:
// toolfleet.event.cancel.<tool>.<call>[.<tenant>.<role>]; the planner publishes them
// when a run is canceled, with the identity of whoever canceled it; a client with
// client.Cancel) is stored in the events stream and heard at once by every replica
// serving the tool (a core subscription each). It is acted on only when its sender (read
// from its subject) may act on the call, by the rule approval answers follow; a refused
// cancel leaves the call as it was and is logged, counted and recorded the same way. A
// cancel of the shape before roles (…<call>.<tenant>) names no sender and is never acted
// on. A running call's context is cancelled (a call waiting to be retried stops
// waiting); its result says canceled (status and code, and who canceled) when the tool
// stopped because of it, interrupted for a non-idempotent tool cut mid-run (its effect
// may be partly done), or the normal result when it finished anyway — the first stored
// result wins, so a cancel after completion changes nothing. A call not yet started is
// answered canceled without running when it is delivered (its cancels are looked up in
// the stream before it runs, coalesced like the results look-up, and only for tools that
// ever had a cancel); a call parked for approval is answered canceled at once.
//
// A core message can be missed — published while the replica's connection is down or
// reconnecting — so a held call's cancels are looked up again on each in-progress beat
// (a third of the ack wait: 10s by default): a cancel acts at once when heard, and at
// the latest one beat later when its message was missed. A call parked for approval
// whose cancel was missed is answered canceled by the next sweep of the approvals (a
// quarter of [WithApprovalTimeout], between 100ms and 5s: 5s by default), which looks
// up the stored cancels of every parked call of a tool that may have one, in one
// coalesced look-up — or sooner, when an answer comes.
//
// # Run context
//
// A call a planner run makes of a tool whose definition asks for it
// (tools.Definition.RunContext) carries the run context: the conversation so far, the
// step and the run's metadata, inline (events.Call.Context) or, when large, as a
// payload of the caller's tenant (ContextRef, read once per call; another tenant's is
// forbidden). The executor gives it to the tool in tools.CallInfo.Run, and only to a
// tool that asked for it: whatever a call carries, every other tool's CallInfo.Run is
// nil (runcontext.go).
//
// # Bad input
//
// Every message on a call subject is answered once — see "The answer rule" in the
// README. Malformed arguments and schema violations are answered invalid with every
// violation; an event that is not a valid call (not JSON, missing or wrong type,
// oversized, nested too deeply) is answered invalid_event or input_too_large at the
// caller's ids ([events.ReplyID]; a message with no ce-id is answered at its
// Nats-Msg-Id); a panicking tool is answered tool_panic. A message that names no caller at
// all goes to toolfleet.dlq.<tool> as a bounded dead letter, and is removed only once
// that is stored. A call delivered MaxDeliver times without completing is answered with
// an error on that delivery (and a copy dead-lettered); the consumer itself never stops
// redelivering, so no call is left unanswered in the stream. An output that does not fit
// in a result becomes output_too_large, decided before publishing; outputs stay valid
// UTF-8 and within [tools.MaxDepth].
//
// Calls of a tool that no executor serves (no catalog entry) are answered no_such_tool
// once older than [WithNoSuchToolTimeout], and messages on subjects that name no tool
// (toolfleet.call.a.b, a literal toolfleet.call.*) invalid_event, by a janitor every
// replica runs; it compares subjects byte for byte and deletes only what it answered.
//
// # Start-up and lost leaders
//
// Run waits for a server that is down, restarting or electing a leader when it starts,
// or a cluster whose nodes are still forming (each try of the setup has its own
// timeout), logging each retry, instead of failing; executors started
// together on a fresh cluster all come up.
//
// Every consumer (calls, approval answers) is pulled with requests that expire after 1s
// (see Pulling; a stopping executor waits for its last ones) and a heartbeat from the
// server on a waiting pull every 500ms. When the node leading
// a tool's consumer dies, the pull waiting there dies silently with it; two missed
// heartbeats (1s) make the executor pull again, and a pull that finds no leader yet is
// tried again on the same beat, so a tool takes calls again about a second after its
// consumer's new leader is elected (nats.go's defaults, a 30s expiry and 15s heartbeat,
// left it without calls for 30s). Pull errors (no heartbeat, no responders, leadership
// change) are logged at warn, identical ones at most every 10s with a count of the
// repeats. Measured
// on a 3-node cluster under load (internal/testsupport/clustertest): after a SIGKILL of the calls
// stream's leader, every tool was served again within the election time.
//
// # Limits
//
// A tool may declare fleet-wide limits on its definition: RateLimit {PerSecond, Burst},
// calls started per second by all replicas together, and MaxInFlightPerTenant, calls
// of one tenant (the tenant of the call's subject; anonymous callers are one tenant)
// running at once across the fleet. Replicas share them through the toolfleet-limits
// bucket ([events.BucketLimits]), changed only by compare-and-set; it is opened only when
// a served tool declares a limit, so other tools pay nothing.
//
// What a caller sees: a call over a limit waits for its turn at the replica that took
// it, without running and without holding a concurrency slot (so other tenants' calls go
// on), kept alive with in-progress acks; its result's limit_wait_ms says how long, and
// its started_at is when it started after the wait. A call that would wait longer than
// the tool's LimitWait (30s by default; the call's deadline when earlier) — a rate
// reservation that far ahead, or no tenant slot freed in that time — or that finds
// 4 x concurrency calls (at least 16) already waiting for a tenant slot on its replica, is
// answered rate_limited (status error, attempts 0, the tool never ran) with
// retry_after_ms: for the rate, when its start would have been; for a tenant cap, a hint
// of 1s. rate_limited is never retried by the fleet. Nothing is lost or doubled: every
// call still ends in one result.
//
// The rate is the generic cell rate algorithm over one key per tool: each call reserves
// a start at least 1/PerSecond after the one before (Burst may start at once after a
// quiet spell), so the k-th start across the fleet is never earlier than (k-Burst)/PerSecond
// after the first reservation. A tenant's calls hold leases in one key per tool and
// tenant, renewed every third of [WithLimitLease] (15s) while they run and removed when
// the tool returns; a replica that dies holding one leaves a lease that runs out within
// the lease time, so its slot is free again for the call's redelivery. Leases and
// reservations use the replicas' clocks (keep them within a small part of a second); a
// crash only leaves capacity unused for a while, never lets more through.
//
// # Shutdown
//
// When Run's context ends, the executor stops pulling and hands back (Nak) at once the
// calls it holds that have not started — those waiting for a place, and those its last
// pulls still bring (each ends within 1s) — so another replica runs them without
// waiting out their ack wait; calls in flight may finish within [WithGracePeriod]; then
// they are cancelled and handed back (Nak) for another replica. Run waits for results being published and
// returns nil.
//
// # Metrics
//
// [WithMetrics] registers Prometheus collectors: calls by tool and status, duration
// histogram, queue wait histogram (from a call's storing in the stream to its first
// delivery being handled), calls in flight, the tools served, retries, redeliveries,
// dead letters, and approvals: requested, waiting and the first expiry among them (as
// each replica's sweep sees the whole bucket), and expired unanswered.
//
// # Tracing
//
// Hand the executor an OpenTelemetry tracer provider and each call it handles is an
// execute_tool span with the GenAI attributes, a child of the caller's span:
//
//	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
//	defer tp.Shutdown(context.Background())
//	ex, err := executor.New(nc, reg, executor.WithTracerProvider(tp))
//
// Without [WithTracerProvider] the executor uses the global provider
// (otel.GetTracerProvider) as it is when [New] runs: spans go wherever a program's
// otel.SetTracerProvider sends them, and nowhere, at almost no cost, when none is set.
// A no-op provider costs nothing. Arguments and results go into spans only with
// [WithTraceContent]. Traced or not, the executor carries a call's trace context
// (ce-traceparent, ce-tracestate) onto its result, its approval request, its run events
// and its policy hook's request, so a caller always finds its trace on its answer; with
// a span, the span's context takes the caller's place. Nothing here reads an environment
// variable or a global switch: the toolfleet programs set their provider up from the
// OTEL_* variables and pass it in the same way.
package executor
