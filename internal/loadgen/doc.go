// Package loadgen drives a load of calls through JetStream and measures it the way a
// caller feels it: calls per second, latency from publish to stored reply, and whether
// every call got exactly one reply.
//
// # Driving a load
//
// A [Generator] reads the replies with an ordered consumer on the reply stream, so a
// reply counts only once JetStream has stored it, and a reply stored twice for one call
// shows up as doubled. Calls are published asynchronously with a bounded window in
// flight; the Nats-Msg-Id of a call is its id, and a reply's subject names the call it
// answers (toolfleet.result.<run>.<call>; [Config].CallOf reads another scheme):
//
//	g, err := loadgen.Start(ctx, nc, loadgen.Config{ReplyStreams: cfg.ResultStreams(),
//		ReplyFilter: filter, Window: 256})
//	if err != nil {
//		return err
//	}
//	defer g.Stop()
//	for i := range n {
//		msg, _ := events.NewCall(events.CallOptions{Source: "/me", ID: fmt.Sprintf("c%d", i), RunID: run}, call)
//		if err := g.Publish(ctx, msg); err != nil {
//			return err
//		}
//	}
//	rep, err := g.Wait(ctx) // every reply, or the calls still unanswered counted as lost
//
// The executor's benchmark and `toolfleet demo` both measure with it, so their figures
// compare.
package loadgen
