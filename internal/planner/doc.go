// Package planner runs the tool loop of LLM agents over the toolfleet fleet: it asks a
// model, turns the model's tool calls into validated call events on JetStream, gathers
// their results from the executors, feeds them back and asks again, until a stop
// condition ends the run.
//
// # A run
//
//	p, err := planner.New(ctx, nc, planner.Config{Models: map[string]provider.Model{"main": m}})
//	go p.Run(ctx)                                   // take steps, results, approvals
//	run, err := p.Start(ctx, planner.StartRequest{Input: "What is 6*7?", Tools: []string{"calculator"}})
//	run, err = p.Wait(ctx, run.ID)                  // run.Answer, run.Calls, run.Termination
//
// Each step: the run's tools (narrowed by the picker service when the set is larger than
// Config.PickThreshold) are translated for the model's provider; the model answers; every
// tool call is checked against the catalog's schema — an invalid call is answered at once
// with the validator's messages (the first invalid call of each tool is a free repair, a
// second counts as an error), an unknown tool with the list of available ones, a tool not
// offered at the step or ruled out by the run's toolChoice with not_allowed (both count as
// errors) — and the rest are published in parallel as call events (with parallel: false
// in the request, one after another in the model's order, each once the one before has
// its result). Run.Offered records
// each step's tools and the picker's results. When the last result of the step is in,
// the results join the conversation in the order of the model's calls and the next step
// is asked for.
//
// # Stop conditions
//
// A run ends with a [Termination]: completed (the model answered without calls),
// final_tool, max_steps, timeout (wall clock, also while waiting for tools or the model),
// token_budget, cost_budget, error_threshold, loop_detected, model_error, stop_condition,
// stop_hook, tool_required (toolChoice
// required, and the model answered without a call twice in a row), or storage_error (a
// part of its state can never be stored). Loop detection compares calls by tool and
// canonical arguments; at Limits.LoopThreshold repeats it warns, stops, or (the
// default) answers the repeated call with a warning instead of running it. It keeps a
// window (the last call's key and its repeat count), not the run's history.
//
// A run's cost (Run.Cost, shown by GET /v1/runs/{id}) is its model's tokens at the
// price of Config.Prices ([PriceTable], a YAML or JSON file for cmd/planner's -prices)
// plus the price of each call sent to the fleet. Limits.CostBudget and TokenBudget hold
// (package budget): before each model call the most the answer can cost (its input at
// provider.InputTokensBound, its output at the request's MaxTokens, which the planner
// caps to fit) must fit what the run's tree has left, or the run ends with cost_budget
// or token_budget without asking; a step whose calls would take the run over its cost
// budget sends none (each is answered cost_budget) and the run ends with cost_budget.
//
// # Budgets over a tree of runs
//
// Limits hold for a run and its nested runs together (package budget). A nested run starts
// with its parent's budgets cut to what the parent's tree has left (tokens, cost, the
// steps of the parent's turn) and the parent's deadline; a run_agent call made with
// nothing left is answered with the budget's code (token_budget, cost_budget,
// max_steps), and so is one whose nested run ended for a budget: neither counts toward
// the parent's ErrorThreshold, and the parent ends by that budget when its next step
// cannot pay for an answer. Each run's control state keeps its own usage (Usage, Cost, its steps) and
// Nested, what its nested runs used: its tree totals ([Run.Tree]) are the sum, and
// MaxSteps, TokenBudget and CostBudget are checked against them. A nested run's tree
// totals are charged to its parent as they change, by compare-and-set on the parent's
// entry of the runs bucket, kept on the run_agent call that started it
// (CallRecord.Nested); the parent's Nested changes by the difference, and its own new
// totals go on to its parent the same way, up to the root. A nested run with a budget
// also reserves, before each model call, the most its answer can cost from every
// ancestor's budgets, by compare-and-set on the ancestor's entry ([runrec.Reservation], in
// Run.Reserved), which the charge carrying the answer's usage settles; a nested run
// without one checks every ancestor's steps, read fresh. A step with priced calls is
// charged to its ancestors before its calls are sent, each ancestor refusing a charge
// its cost budget cannot take with what it holds for answers under way (no call is
// sent; the run ends with cost_budget). So runs of a tree asking or calling at once
// cannot spend past a budget between them, however wide the tree fans out.
//
// Why this and not JetStream counters (Nats-Incr, one per ancestor): a charge carries
// the nested run's totals with a sequence number, not an increment, so it is idempotent
// (a step taken again after a crash charges nothing twice, charges arriving out of order
// keep the latest, and a lost charge is made good by the next), which a counter is only
// within its stream's duplicate window; a refusal is part of the same compare-and-set
// that would have stored the charge, where a counter overspends first and gives back;
// the totals are read with the run itself (GET, the checks) instead of from a second
// stream; and no new stream, server setting or NATS permission is needed (a reservation
// is held the same way, on the same entries, for the same reasons). What it costs:
// a run without nested runs writes and reads what it did before (BenchmarkLoopStep,
// before and after, same session, alternating: loop p50 new/old 0.80–1.26, median 0.91,
// i.e. noise). A nested run at depth d pays, per step, d fresh reads (the ancestors'
// check) and d compare-and-set writes (its charge), and d more of each when it ends; its
// parent's entry takes one fixed-size charge per call of its current step, so no value
// grows with a run's length (BenchmarkNestedRun, a root delegating one tool-call step:
// p50 2.1–2.5 ms before, 2.6–3.7 ms after, ratio median about 1.35x on 2 shared cores).
//
// A run may bring its own stop conditions. StartRequest.StopWhen ([StopCondition]):
// stop when a named tool succeeded, or when a successful call's output contains a
// substring or matches an RE2 expression (at most 8 conditions, patterns of at most 512
// bytes, over the output's first 64 KiB) — the run ends with stop_condition once that
// step has all its results, its answer the matching call's output, Detail naming the
// condition. StartRequest.StopHook
// ([StopHook]): a NATS subject any service answers (request/reply, like approvals),
// asked before each step after the first with the last step's [StopSummary] (its calls
// and their statuses, its usage, the run's tokens and errors so far) and answering
// [StopDecision] {"action":"continue"|"stop","reason"} within its timeout (default 2s,
// at most 10s); stop ends the run with stop_hook and the reason. A hook that does not
// answer in time or answers nonsense lets the run go on by default (onError
// "continue": a policy's outage should not end every run in flight, which keep their
// own limits); onError "stop" ends the run instead, for a hook that must see every
// step. A hook's subject is a literal subject outside toolfleet.>, $> and _INBOX.>.
//
// A run may also bring a policy hook, StartRequest.PolicyHook ([PolicyHook], an
// [events.Hook] like the stop hook): asked about each call of the run, and of its nested
// runs, after the call is hydrated and the run's own refusals, before approvals and
// before it is published, with an [events.PolicyRequest] (level "run"). It answers
// allow, deny (the planner answers the call itself, status denied, with the reason) or
// modify (the new arguments are hydrated again: invalid ones refuse the call with the
// validator's messages, valid ones go out and CallRecord.ArgumentsOriginal keeps the
// model's). The decisions are stored with the step's record, in CallRecord.Policy
// (where a tool's own hook, asked by its executor, adds its decision from the result).
// No usable answer in time is its onError: deny (the default) or allow.
//
// A composite is a caller like any other (composite.go): each sub-call of a model's call
// of a composite tool (tools.Definition.Composite names its sub-tools) is checked like a
// call of the model before the composite call goes out — the run's tool set without
// toolChoice, the roles of its owner and actors, the sub-tool's schema, the policy hook
// (asked about each sub-call under its own id) — and any refusal refuses the composite
// call, naming the sub-call. The call's record lists its sub-calls (CallRecord.Subs),
// whose approvals are listed and answered like the run's calls'.
//
// # Durability
//
// A run's state is in two places, neither of which grows per write with the run's
// length: its journal and the results stream. The journal is one stream,
// KV_toolfleet-runs ([events.Config.JournalStream]): the runs bucket's stream, whose
// subjects also take the run log. The run's control state (status, step, counters,
// limits, the loop detector's window, the current step's tool set and calls without
// their arguments or outputs) is the bucket's entry for the run, changed only by
// compare-and-set, so every change writes a value of the same small size. What the run
// accumulates is written once, on toolfleet.runlog.<run>.input, .step.<n>, and
// .args.<attempt>.<i> for large arguments: the input, and per step the model's message,
// the calls it made and how the previous step's calls ended (the answer that completes
// the run is the control state's Answer). Tool outputs are not
// copied: they stay in the results stream where the executors stored them, read by call
// id (so a run shows them as long as events.Config.ResultsMaxAge keeps results; a run's
// own steps never outlast them, since a run lasts at most a day and results are kept at
// least that long by default). [Planner.Get] assembles the run from the two; a replica caches a run's
// conversation and control state between steps, and the stored parts are the truth.
//
// On a replicated journal (or one in memory), a step whose model made calls is one
// append: its record and the control state it leaves, in one atomic batch
// (nats-server 2.12+, AllowAtomicPublish) whose commit alone is awaited — the record
// only if the step has none (Nats-Expected-Last-Subject-Sequence 0), the state only if
// the run is still at the revision the step started from. Its events and calls go out
// once the batch is stored. At R3 a batch takes 0.58x the time of the two writes it
// replaces (BenchmarkJournalStep in clustertest, p50 0.44–0.55 ms against 0.75–0.95 ms
// on 2 shared cores). A single file-stored server stages each batch in a file store of
// its own, synced at the commit, which makes a batch 16–19x its two writes
// (BenchmarkLoopStep's step-batch/parts: 2.4–3.0 ms against 0.15 ms): there a step is
// written in two parts, as described next.
// In two parts, the record is written first (the first writer wins) and the
// compare-and-set while the step's calls go out. A batch refused (another replica
// recorded the step, or the run changed meanwhile: a cancel, a nested run's charge) or
// whose outcome is unknown (no answer, its stream's leader lost) leaves nothing that
// may be assumed stored: the step is then written in two parts, which settles what the
// batch did. So is a first step whose model answered before its run's create was
// stored (below): waiting for the create to batch would put one more write on its path.
//
// The guarantees, and the write that carries each:
//
//   - A step's calls exist only if its record does: they are published once the batch,
//     or the record written alone, is stored, with ids derived from run, step and
//     position.
//   - Exactly one continuation per step: the compare-and-set on the revision the step
//     started from (in the batch or alone). Of two replicas taking the same step one
//     write wins; the other's batch stores nothing, and it makes the recorded step (the
//     first writer's record) part of the run. A result that completes a step is stored
//     with the next step's write, so the step after it is taken once.
//   - Nothing half-stored: a batch is all or nothing; one cut by a planner's death
//     before its commit stores nothing (TestPlannerKilledMidBatch), nor one whose
//     stream leader dies mid-batch (clustertest's TestStepBatchRidesOutLeaderLoss).
//   - Honest results after crashes: each result is recorded on its call by
//     compare-and-set, once (a repeated result finds the call done); a call published
//     again carries its id, which JetStream drops as a duplicate.
//   - Replicas take over: all of a run is in the journal and the results; a step is
//     claimed by a message (a plan step, a result) that another replica gets when the
//     claim is not acknowledged, or by a lease the sweeper ends. A claim lasts
//     Config.StepLease (3s) after its replica's last renewal (every third of it, while
//     it holds the claim), so a dead replica's steps move within it (local.go).
//   - The end is announced after it is stored: the done event follows the
//     compare-and-set that ends the run, and is published again (same id, dropped by
//     JetStream) whenever a finished run is seen, so an end whose event was lost is
//     announced.
//
// Upgrading from a version that kept the run log in its own stream, TOOLFLEET_RUNLOG,
// loses nothing: the planner's start copies its records into the journal before it
// serves (jsutil.EnsurePlanner: the old stream's subjects are retired, the journal
// sources it, each record keeping its subject, so a record written once stays written
// once), and logs that the old stream may be deleted (TestUpgradeKeepsTheConversationOfAnEarlierRun).
//
// A replica that starts a run (not a nested one) and serves steps asks the model for its
// first step while the run is being stored (firststep.go): Start still returns only
// once the run is stored, the step's events are held until the run's started event,
// and its calls and state wait for the create; a run that could not be stored
// announces and sends nothing. A replica keeps the control states it wrote or read
// decoded, and copies them field by field ([Run.Clone]) rather than through JSON.
//
// Steps are messages on the work-queue stream TOOLFLEET_PLAN; results and approval
// requests are read by durable consumers all planner replicas share. Every handler is
// idempotent (call ids are derived from run, step and position; a step's record is
// written once, the first writer winning, and the compare-and-set makes the recorded
// step part of the run whichever replica asked the model; JetStream drops repeated
// publications), so any replica continues any run, and a planner killed mid-run loses
// nothing and repeats nothing when it or another replica comes back. A write that can
// never succeed (a record over the server's max payload) ends the run with
// storage_error instead of being retried until the run's time limit.
//
// # Backpressure
//
// When JetStream acknowledges writes more slowly than the planner makes them (a server
// that syncs every write to disk, a slow disk, a busy cluster), the planner slows down
// instead of failing runs. Every asynchronous write — a run's input and large
// arguments, calls, run events, usage records, payloads — goes through one window of
// at most 4000 unacknowledged publishes (jsutil.Window); a write that finds it full
// waits for room, bounded by its request's or step's context, rather than failing with
// nats.go's "stalled with too many outstanding async published messages". A write whose
// acknowledgement is late is published again until it is settled (jsutil.Settle: its
// id or expected sequence keeps it single), and a step that still could not write is
// taken again from the plan stream. So a run already accepted does not end in error
// because its server was slow.
//
// New runs are admitted only while the planner keeps up (admission.go): once writes
// have waited for room longer than Config.MaxStall (1s), or Config.MaxStarting (256)
// runs are being started at once, Start refuses a new run with a 429 [APIError] whose
// RetryAfter (the HTTP API's Retry-After) says when to try again, before anything of
// the run is stored, so nothing is half-created and the same request can be sent
// again; pkg/client/runs and the CLI do. Runs refused are counted by reason
// (toolfleet_planner_runs_refused_total), the waits for room by their length
// (toolfleet_planner_publish_wait_seconds). Nested runs and follow-ups belong to runs
// already admitted: they wait, they are not refused. When the server keeps up, none of
// this costs anything measurable: the window is never full and a publish is one call,
// as before (BenchmarkLoopStep, before and after in one session: see docs/benchmarks.md).
//
// # Context budget
//
// Each tool output is shown to the model within the run's Limits.ContextBudget (64 KiB
// by default): a larger one is replaced, in the model's context only, by a JSON object
// with its first bytes, its size, the call id as a handle and a note; the full output
// stays in the call's result (GET /v1/runs/{id}). The same rule holds for the model's own
// calls when the conversation is replayed: arguments over the budget are shown as such
// an object (the call ran with them whole).
//
// Arguments over events.Config.ClaimCheckBytes are stored once, as a payload of the
// run's tenant, when the step is recorded: the call record holds the reference
// (argumentsRef), the call event carries it (arguments_ref), and neither the run log nor
// the tool_called event copies the arguments (see runstore's args.go).
//
// # Approvals and nested runs
//
// Executors park calls of unsafe tools and announce them; the planner marks the call
// awaiting_approval and relays the request as a run event. [Planner.Approve] (or POST
// /v1/approvals/{callId}, or any NATS client publishing events.NewApprovalAnswer)
// approves, denies, or approves with modified arguments. The first answer wins: the API
// records it on the call by compare-and-set before publishing it and refuses later answers,
// and answers to calls not awaiting approval, with 409. The call record keeps the
// decision (who, when, why) and, for modified arguments, what ran beside the model's;
// results carry the executor's record of it. The planner's own tool run_agent
// starts a child run with a subset of the tools; its answer is the call's result; depth
// is bounded by Limits.MaxDepth, and the child draws from the parent's budgets.
//
// # Run control
//
// A caller controls its tenant's runs while they last ([Planner.Cancel], POST
// /v1/runs/{id}/cancel, or a NATS request on events.RunCancelSubject, which a planner
// replica answers as a micro service). A cancel ends the run with
// [TerminationCanceled], recording who (the caller, never a by it wrote), when and why
// (Run.Canceled), and publishes a cancel event (events.NewCancel, with the identity of
// the caller who canceled and the call's tool) for each call without a result:
// executors, which act on it only when that caller may act on the call (events.MayAct,
// the rule of auth.go), end the tool's context (its result says canceled,
// or interrupted for a non-idempotent tool, or is its normal result when it finished
// first) and answer calls parked for approval canceled. Nested runs are canceled with
// their parent. Later results are recorded on the run; no step follows. A run that has
// ended is refused with 409 and the run (the cancels of its calls are published again,
// deduplicated by id, so an interrupted cancel completes).
//
// [Planner.Continue] (POST /v1/runs/{id}/messages) adds a follow-up: a run that ended is
// reopened under its id and goes on with its whole conversation; a running run takes
// the messages before its next model call. The messages are a record of the run log
// (toolfleet.runlog.<run>.msg.<k>, written once, carrying the client's optional id so a
// retried request is not added twice), counted by the control state (Injected) once a
// compare-and-set makes them part of the run; each step record says how many of them
// its model call saw (Seen), which places them in the conversation whichever replica
// asked. A continuation is a turn (Run.Turn): MaxSteps counts from its first step
// (TurnStart), its wall clock and error count start again, the token budget is the
// whole run's. The answer that completed a run gets its step record when the run is
// continued. Canceled, storage_error and token_budget runs and nested runs are not
// continued (409).
//
// [Planner.ChangeTools] (POST /v1/runs/{id}/tools, or a follow-up's "tools") enables and
// disables tools for the run's next steps, recorded in its control state (Disabled,
// Tools): a disabled tool is not offered, and a call of it is refused with not_allowed
// like any tool outside the step's set. Its optional reminder is a message record like a
// follow-up's, which the model sees at its next step.
//
// # Pause and resume
//
// A run pauses at a step boundary — once every call of a step has its result, before
// the model is asked again — when its start asks for it (StartRequest.Pause:
// afterEveryStep, or afterTools: a step that called one of them) or a caller does
// ([Planner.Pause], POST /v1/runs/{id}/pause, which takes effect at the next boundary).
// Its status is then paused (GET, lists with status=paused, a paused run event; Run.Paused
// says why and before which step), and nothing of it runs: it is its value in the runs
// bucket (no goroutine, timer or lease; the sweeper watches running runs only), so it
// costs nothing while it waits and a planner restart changes nothing. Its wall clock
// does not run while it waits: a resume starts it again for Limits.Timeout, like a
// continuation's; its steps keep counting within the turn. [Planner.Resume] (POST
// /v1/runs/{id}/resume) may first replace or drop messages, compact a range into one
// summary message, add messages, and change the limits (within a start's ranges) and
// the pause options; the edit is a message record of the run log, like a follow-up's,
// applied where the model's conversation reaches it, so the model sees the edited
// conversation from then on while GET /v1/runs/{id}/messages, the run log and the
// resumed event keep the original and the edit (?view=model shows a paused run's
// edited conversation, whose indices edits name). An edit that would leave a call id
// without exactly one result after it, or a result without its call, is refused (400,
// naming the call), whatever the conversation was before it. Who may
// pause and resume: the rule of follow-ups (auth.go). A follow-up to a paused run is
// kept and the run stays paused (the model sees it after the resume); a paused run can
// be canceled; nested runs pause with their parent only (409). A replica that remembers
// a run paused reads it again before taking its step, so a resume through any replica
// is taken (pause.go).
//
// # Run context for tools
//
// A tool whose definition asks for it (tools.Definition.RunContext) gets with each call
// the run context: the conversation as the model saw it at the call's step, ending with
// the model's message that made the call, the step and the run's metadata, bounded to
// 1 MiB of messages (the oldest are left out first, counted in Omitted). It travels in
// the call event, or as a payload of the run's tenant stored once per step when it is
// larger than the claim-check size; other tools' calls carry nothing (runcontext.go).
//
// # Inspection
//
// Package plannerapi (internal/planner/plannerapi) serves the HTTP API over the
// planner's methods ([Planner.Start], [Planner.GetFor], [Planner.Wait],
// [Planner.FollowEvents], [Planner.Approve], [Planner.Cancel], [Planner.Continue],
// [Planner.ChangeTools], [Planner.Pause], [Planner.Resume]): POST /v1/runs, GET /v1/runs/{id} (status,
// answer, every call with its timeline, tokens, steps, termination), GET
// /v1/runs/{id}/messages (the conversation, in order), GET
// /v1/runs/{id}/events (the run's lifecycle as Server-Sent Events, replayed from its
// start; each event's SSE id is its sequence on the events stream, and a reconnection
// with Last-Event-ID resumes after it, or gets 204 once it saw done), POST
// /v1/approvals/{callId}, POST /v1/runs/{id}/cancel, POST /v1/runs/{id}/messages, POST
// /v1/runs/{id}/tools, POST /v1/runs/{id}/pause, POST /v1/runs/{id}/resume, POST
// /v1/runs/{id}/fork and GET /v1/runs/{a}/diff/{b} ([Planner.Fork], [Planner.Diff]: rerun
// a run from a step, reusing the recorded results of the steps before it, and compare
// two runs step by step; fork.go, diff.go), GET /v1/runs/{id}/events with Accept:
// application/json ([Planner.ListEvents]: the events stored so far, a page at a time),
// the lists (below), /healthz, /readyz and /openapi.json (the
// API's OpenAPI 3.1 document). The same lifecycle is published on
// toolfleet.event.run.<run>.<what> for any NATS subscriber. The planner's methods
// fail with an [APIError], which carries the status the API answers (the NATS control
// service answers the same, in [ControlReply]); who may see and act on a run is the
// planner's rule (auth.go), whichever way the caller came.
//
// # Lists
//
// [Planner.ListRuns], [Planner.ListApprovals], [Planner.ListTools],
// [Planner.ListDeadLetters] and [Planner.FollowTenantEvents] serve GET /v1/runs,
// /v1/approvals, /v1/tools, /v1/dead-letters and /v1/events, for the caller's tenant.
//
// Runs and approvals are answered from the run index (runindex.go), which each replica
// keeps in memory: a [RunSummary] of every run of the runs bucket, per tenant in
// creation order (with its running runs and each run's nested runs beside), the calls
// awaiting approval, and the last 1000 answered approvals per tenant. It is fed by the
// watch of the runs bucket every replica runs anyway (watchRuns, which now decodes one
// small struct for the sweeper and the index), so it is rebuilt from the bucket's
// values when a replica starts (lists wait for that, up to 10s, then 503), and every
// replica answers the same within the watch's delay. The control state carries what the
// index cannot take from the current step alone: InputPreview (written once at start,
// so no list reads a run log), CallCount, Called (the tools whose calls went out),
// ToolErrors and Denials, and Settled (the calls of the step before that asked for an
// approval, as they ended: a result completing a step is stored with the next step's
// calls, so without them an approval answered there never reached the history).
// What a list item and the run's view show at a glance is computed from those facts by
// the same functions of runrec (Waiting.Shown: awaiting_approval, never stored;
// OutcomeOf; DurationMS; PauseFace). A page without filters costs a binary search and
// the page; status=running, status=awaiting_approval and parent= look at those runs
// only; the other filters (termination, outcome, metadata, tool, q) scan the tenant's
// summaries from the cursor until the page is full. Measured on 2 shared cores, 100k
// stored runs of one tenant (BenchmarkListRuns, BenchmarkIndexRebuild): about 0.76 KB
// of memory per run (76 MB per 100k; 0.69 KB before the glance fields, same session), a page of 50 in 30-100 µs (newest or by cursor), a filter that matches
// nothing 33-70 ms (the whole scan), and a start-up rebuild of 3.2 s (the watch
// delivering 100k values, about 1 KB each, and their decoding).
//
// GET /v1/tools' recent calls are the calls whose results were stored within the last
// five minutes, whoever made them (planner runs, clients calling the fleet straight),
// counted by every replica from the results streams (resultcount.go, toolstats.go:
// 10-second buckets); its calls waiting and in flight are its consumers' pending and
// ack-pending counts. Its executors are the larger of the pull
// requests waiting on the tool's consumer and the executors that answered within the
// window. Dead letters are read from their stream backwards, at most 5000 per page,
// filtered by the tenant of the subject the original message came on.
//
// # Run events
//
// Every run event is a CloudEvent of type `io.toolfleet.run.<what>` on
// `toolfleet.event.run.<run>.<what>[.<tenant>]` (stream `TOOLFLEET_EVENTS`), whose data is
// `{"run_id", "tenant", "step", "call_id" (for an event about a call), "at", "detail"}`:
// `at` repeats the CloudEvent time, so a reader of the data alone (SSE) has it.
//
//	| `<what>` | from | when | `detail` |
//	|---|---|---|---|
//	| `started` | planner | the run is stored | `model`, `tools`, `parent`, `forkedFrom` |
//	| `step_started` | planner | the model is asked for the step | `model` |
//	| `text_delta` | planner | streamed text of the step's answer, coalesced (≤ 1 per 50 ms or KiB) | `text`, `index` (0, 1, … within the step) |
//	| `tool_call_started` | planner | the model's stream delivered a tool call | `tool`, `modelCallId`, `index` |
//	| `model_answered` | planner | the model's answer is recorded | `toolCalls` (`callId`, `modelCallId`, `tool`), `usage` (the step's), `runUsage`, `tokens`, `cost`, `text` |
//	| `tool_called` | planner | a call is published to the fleet | `tool`, `arguments` |
//	| `tool_started` | executor | the call has run for 20 ms, or reported progress before (a quicker call is not announced: its result's `started_at` says when it started) | the executor's |
//	| `tool_progress` | executor | the tool reports progress | the executor's |
//	| `tool_result` | planner | a call succeeded | the call record (status, output, timeline, attempts, executor) |
//	| `tool_error` | planner | a call failed, or the planner answered it itself (invalid input, no_such_tool, not_allowed, loop_detected, depth limit, cost_budget) | the call record with its `error` |
//	| `approval_needed` | planner | an executor parked the call for approval | the request |
//	| `approval_answered` | planner | the API recorded an answer | the decision (`decision`, `by`, `reason`, `at`) |
//	| `loop_detected` | planner | a repeated call (with its call id unless loopAction is warn) | `tool`, `action`, `message` |
//	| `paused` | planner | the run paused at a step boundary | `at`, `step`, `reason`, `tool`, `by`, `why` |
//	| `resumed` | planner | a caller resumed the paused run | `by`, `added`, `limits`, `edit` (`replace`, `drop`, `compact`, `before`) |
//	| `done` | planner | the run ended | `termination`, `detail`, `answer` |
//
// # Streaming
//
// The model is asked with [provider.Model.Stream]: its text is announced as it comes,
// in text_delta events (the text and its index within the step), coalesced so that a
// step sends at most one per 50 ms or per KiB of text; each tool call is announced by
// tool_call_started (tool, the model's call id, and the fleet call id it will have) as
// soon as the stream has delivered it. Deltas are a preview: the conversation stores
// the final message, and a step asked again after a crash may stream again (repeated
// delta ids are dropped by JetStream).
//
// # Tracing
//
// [Config].TracerProvider makes a run an invoke_agent span and each model call a chat
// span under it, with the GenAI attributes; a run started with a span in Start's context
// (or nested in a traced run) joins that trace. Without it the planner uses the global
// provider as it is when [New] runs; a no-op provider costs nothing. Traced or not, a
// run stores the trace context it started under and carries it on its calls, run events
// and hook requests, so the executors' execute_tool spans join the caller's trace.
//
// # Why internal
//
// The loop is not a public package yet, by decision. Its [Config] takes models as
// internal/provider's Model, whose wire types follow the providers' formats and still
// change with them; making the planner public would freeze those too. Users do not need
// the loop as a library to use it: they run cmd/planner (or cmd/toolfleet) and talk to it
// through the HTTP API and the events on NATS, which are the stable contract
// (pkg/events), while the parts users extend are public: tools (pkg/tools), executors
// (pkg/executor) and picking (pkg/pick). The loop becomes public when a model interface
// is settled in a public package, so that a user's own model client can drive it.
package planner
