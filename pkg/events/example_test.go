package events_test

import (
	"encoding/json"
	"fmt"

	"github.com/toolfleet/toolfleet/pkg/events"
)

func ExampleCallSubject() {
	subj, _ := events.CallSubject(events.Identity{}, "get_weather")
	fmt.Println(subj)
	_, err := events.CallSubject(events.Identity{}, "get.weather") // a '.' would change which executors see it
	fmt.Println(err)
	// Output:
	// toolfleet.call.get_weather
	// invalid_event: tool name "get.weather" is not allowed: use 1 to 64 letters, digits, '_' or '-'
}

// Any CloudEvents id may name a call; the subject holds its token.
func ExampleResultSubject() {
	plain, _ := events.ResultSubject("", "run-1", "call_1")
	fmt.Println(plain)
	urn, _ := events.ResultSubject("", "run-1", "urn:uuid:1")
	fmt.Println(urn)
	// Output:
	// toolfleet.result.run-1.call_1
	// toolfleet.result.run-1.=s2L1CHTHAgI4cnBfA0dYMiGV2M0_kiOfQfoxX7lMp7o
}

// Parsers are exact: a subject of another shape is refused, never guessed at.
func ExampleParseResultSubject() {
	run, call, tenant, ok := events.ParseResultSubject("toolfleet.result.run-1.call_1")
	fmt.Printf("%s %s %q %v\n", run, call, tenant, ok)
	run, call, tenant, ok = events.ParseResultSubject("toolfleet.result.run-1.call_1.acme")
	fmt.Printf("%s %s %q %v\n", run, call, tenant, ok)
	_, _, _, ok = events.ParseResultSubject("toolfleet.result.run-1.call_1.acme.extra")
	fmt.Println(ok)
	_, what, _, ok := events.ParseRunEventSubject("toolfleet.event.run.run-1.done")
	fmt.Println(what, ok)
	// Output:
	// run-1 call_1 "" true
	// run-1 call_1 "acme" true
	// false
	// done true
}

// A call is built with NewCall and read back with DecodeCall, which takes what a
// consumer delivers (a jetstream.Msg) or, as here, a core message through CoreMsg.
func ExampleNewCall() {
	msg, err := events.NewCall(events.CallOptions{Source: "/me", ID: "call_1", RunID: "run_1"},
		events.Call{Tool: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(msg.Subject, msg.Header.Get(events.HeaderID), msg.Header.Get(events.HeaderMsgID))

	ce, err := events.DecodeCall(events.CoreMsg(msg), 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(ce.ID, ce.RunID, ce.Call.Tool, string(ce.Call.Arguments))
	answer := ce.Answer() // the result's address: tool and the caller's ids
	fmt.Println(answer.Tool, answer.CallID, answer.RunID)
	// Output:
	// toolfleet.call.get_weather call_1 call_1
	// call_1 run_1 get_weather {"city":"Oslo"}
	// get_weather call_1 run_1
}
