// Package jsutil is how toolfleet's own parts talk to NATS JetStream robustly, on top of
// the contract in pkg/events: creating the streams and buckets an [events.Config]
// describes ([Ensure], [EnsurePlanner], [EnsureLimits]) and moving the run log of an
// earlier version into the runs' journal when a planner starts ([RunLogRetired]),
// starting while a server or a
// cluster is not ready yet ([RetrySetup]), writing through a server restart or a leader
// election ([RetryWrite], [PublishSettled], [MayPass], [IsWriteInProgress],
// [IsAlreadyAnswered]), reading what a replicated stream stored ([DirectGetLast],
// [DirectGetWritten], [LeaderGetLast]), pulling so that a lost consumer leader is noticed
// within a second ([ConsumeOptions], [PullErrors]), the payload store of claim checks
// ([Payloads]), the live catalog ([Catalog]), and asking hooks over NATS request/reply
// ([AskHook], [AskPolicy]).
//
// It is internal because none of it is the contract: a client of another language
// speaks to a fleet with pkg/events alone (subjects, events, the stored settings), and
// these helpers, their bounds and their retries may change with the parts that use
// them (pkg/executor, pkg/client, the planner, the MCP edge, the picker, the CLI)
// without changing what travels on the wire.
package jsutil
