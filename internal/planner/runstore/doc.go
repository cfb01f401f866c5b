// Package runstore is the planner's journal: where a run lives on JetStream, and how
// it is read back.
//
// A run is in two places, neither of which grows per write with the run's length. Its
// control state ([runrec.Run] without the conversation) is the run's entry of the runs
// bucket, which a [Store] changes only by compare-and-set, remembering the last
// revision of each running run so that the usual change costs no read. What the run
// accumulates is written once, on the run log's subjects of the same stream ([Log]):
// its input, a [StepRecord] per step, a [MessageRecord] per follow-up or resume, and
// arguments too large to share their step's record; tool outputs stay in the results
// stream, read by call id. [Log.Assemble] puts a run together from the two, and
// [Log.Conversation] gives the conversation a step asks the model with.
//
// On a replicated (or in-memory) journal a step's record and the state it leaves are
// one atomic batch ([Store.UpdateWith]); elsewhere they are two writes (see
// [BatchesStagedInMemory]). What the guarantees rest on — a record written once, the
// first writer winning; one continuation per step by compare-and-set — is the
// planner's package doc's "Durability".
package runstore
