// Package events is toolfleet's event contract on NATS JetStream: the CloudEvents that
// travel between callers and executors, the subjects they travel on, the streams,
// consumers and buckets that store them, and the live tool catalog. It is what a client
// of any language, or any Go client, needs to speak to a fleet; how toolfleet's own
// parts talk to JetStream robustly (creating the streams, riding out a leader election,
// storing payloads, keeping the catalog) is theirs, and not here.
//
// # Events on the wire
//
// Every message is a CloudEvent 1.0 in binary content mode: attributes in ce-* NATS
// headers, data as a JSON body. So any NATS client, the nats CLI included, can publish a
// call or read a result:
//
//	nats pub toolfleet.call.get_weather '{"arguments":{"city":"Oslo"}}' \
//	  -H ce-specversion:1.0 -H ce-id:call_1 -H ce-type:io.toolfleet.tool.call \
//	  -H ce-source:/me -H ce-runid:run_1 -H Nats-Msg-Id:call_1
//
// The event id is the call id and is also sent as Nats-Msg-Id, so JetStream drops a
// re-published call or result within [Config].DuplicateWindow; beyond the window, a result
// is stored only where its call has none ([NewResult]: a second one is refused with
// JetStream error code 10071). Extensions:
// runid, attempt, deadline (RFC 3339) and traceparent (W3C). A call without runid is its
// own run.
//
// [Encode] writes the headers directly; the CloudEvents SDK is the reference, kept in
// package eventstest, which only tests import, so that no binary links the SDK (the tests
// prove both produce and accept the same events; the lean codec is several times
// cheaper). [Decode] reads any [Message] — a [jetstream.Msg] as a consumer delivers it, a
// core message through [CoreMsg] — in binary mode or structured mode
// (application/cloudevents+json, or a header-less JSON event), and refuses, with an
// invalid_event [tools.Error] that says why, a message without
// ce-specversion, ce-id, ce-type or ce-source, with a type that does not belong on its
// subject, a body that is not JSON or is nested too deeply, or one larger than the limit
// (input_too_large). A refused event still yields the ids to answer it with.
//
// # Constructors and decoders
//
// Every event type has its constructor, which picks the subject, the type and the id
// the contract requires, and its decoder, which checks them: [NewCall] ([CallOptions]
// carry the ids, deadline and trace context) and [DecodeCall]; [NewResult] and
// [DecodeResult] ([CallEvent.Answer] addresses a result to its caller);
// [NewApprovalRequest], [DecodeApprovalRequest], [NewApprovalAnswer],
// [DecodeApprovalAnswer]; [NewRunEvent], [DecodeRunEvent]; [NewPlanStep],
// [DecodePlanStep]; [NewDeadLetter], [DecodeDeadLetter]; [NewCancel], [DecodeCancel]
// (a cancel of a call, id [CancelID], stored in the events stream and heard at once by
// the executors serving the tool; see [Cancel]). Who may answer an approval or cancel a
// call — and act on a run — is one rule, [MayAct], which the planner and the executors
// both apply; an act it refuses is recorded as a [RunActRefused] run event. An approval request's id is its
// call id; every answer to it has the id [ApprovalAnswerID] (approval-<call token>), so
// the first answer to a call wins and JetStream drops later ones in its duplicate
// window. A [Result] of a call that waited for approval carries an [Approval] record:
// decision ([DecisionExpired] when none came in time), approver, reason, time, and the
// original and approved arguments when an approval replaced them. Constructors return the
// *nats.Msg to publish; decoders take a [Message]: a [jetstream.Msg] as a consumer
// delivers it, a core message through [CoreMsg], a message read from a stream through
// [StoredMsg].
//
// # Subjects
//
// Subjects are built only here: [CallSubject] (toolfleet.call.<tool>), [ResultSubject]
// (toolfleet.result.<run>.<call>), [DeadLetterSubject] (toolfleet.dlq.<tool>),
// [ApprovalRequestedSubject] and [ApprovalAnsweredSubject]
// (toolfleet.event.approval.{requested,answered}.<tool>.<call>), [RunEventSubject]
// (toolfleet.event.run.<run>.<what>), [CancelSubject]
// (toolfleet.event.cancel.<tool>.<call>), [PlanSubject] and the picker's [PickSubject]. A
// call made with an [Identity] adds its tenant and role to its subject
// (toolfleet.call.<tool>.<tenant>.<role>), and every answer to it — result, approval
// request, the run's events — adds the tenant as its last token, so NATS permissions can
// give each tenant its own subjects and nothing else; an act on it — an approval answer,
// a cancel — adds the actor's tenant and role, so that who acts is known and cannot be
// claimed; such messages are
// deduplicated under id@tenant ([MsgID]). Tool
// names follow [tools.NamePattern]; ids of any kind reach a subject as their [IDToken];
// anything else is refused, because a '.', '*', '>' or a space would change which
// subscribers see the message. Each subject read back has an exact parser
// ([ParseCallSubject], [ToolOfCallSubject], [ParseResultSubject], [ParseRunEventSubject],
// [ParseApprovalRequestSubject], [ParseApprovalAnswerSubject], [ParseCancelSubject]): a subject of any other
// shape is refused, never guessed at. Answers carry the caller's id ([ReplyID]): any
// non-empty CloudEvents id is accepted, and an id of letters, digits, '_' and '-' is its
// own token while any other becomes '=' and its hashed form, so no id can add a token or
// a wildcard.
//
// # Dead letters
//
// A message that names no caller at all is set aside by [NewDeadLetter], bounded so that
// it can always be stored: the body is kept up to 64 KiB and described by its size and
// SHA-256.
//
// # Storage
//
// [Config] holds every stored setting in one place: the streams ([Config.Streams]),
// buckets ([Config.Buckets]) and consumers ([Config.CallConsumer]) it describes are what
// every part creates, idempotently, before it serves.
// Payloads too large for an event (a tool's output or a call's arguments over
// Config.ClaimCheckBytes) are stored by reference on the payloads stream ([PayloadRef],
// [PayloadSubject]): a result carries output_ref instead of output, a call arguments_ref
// instead of arguments. The two fields of a call are exclusive; a call with both, or
// with a malformed reference, is refused invalid_event ([DecodeCall]). Anyone may
// publish arguments_ref after storing the chunks (pkg/client does it for large
// arguments): the executor reads the payload only when it is the call's
// tenant's (else forbidden), up to PayloadMaxBytes, checks it against the reference
// (a payload gone or not matching is invalid, never retried), and validates the
// arguments like inline ones.
// The calls stream is a work queue: a call is gone once acknowledged, and JetStream
// allows one consumer per filter, which is what a tool class is: one durable consumer
// per tool ([ConsumerName]) shared by all its replicas. Results, events and dead letters
// use limits retention. See [Config] for durability (sync_interval vs replicas). The
// planner's own work queue of run steps ([Config.PlanStream], [PlanSubject]), its
// consumers ([Config.PlannerConsumer]) and its run-state bucket ([Config.RunsBucket])
// are defined here too, and created only by planners; so is the picker's embeddings
// bucket ([Config.EmbeddingsBucket]), created only by pickers.
//
// # Catalog
//
// The catalog is the KV bucket toolfleet-catalog ([BucketCatalog]; key = tool name,
// value = Definition JSON). Executors keep their entries fresh, putting them again every
// [Config].CatalogTTL/3; the bucket's TTL removes the entry of a tool nobody refreshes
// any more, and a watcher sees its delete marker. One rule says what an entry must be
// ([CatalogEntry]); an entry that breaks it withdraws its tool.
package events
