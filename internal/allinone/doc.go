// Package allinone runs the whole toolfleet fleet in one process: an embedded
// nats-server with JetStream (file storage), an executor serving the built-in tools, the
// picker service and the planner. It is the first run (`toolfleet demo`), the
// interactive playground (`toolfleet dev`), and a fixture for tests.
//
// # The demo
//
// [Demo] runs a scripted agent conversation through the fleet — a parallel step, an
// invalid call repaired after the validator's messages, an unsafe write_file that waits
// for an approval (the demo approves it, and says so), a final answer — prints the run's
// timeline, then publishes a few thousand tool calls as call events and prints calls/s,
// latency percentiles, retries, failures, and how many calls were lost or doubled (none,
// or the demo fails). With TOOLFLEET_MODEL set the run uses that model instead of the
// script; the scripted model is labelled as such wherever it is used.
package allinone
