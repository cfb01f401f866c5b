package events_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolfleet/toolfleet/pkg/events"
)

type natsMsg struct{ *nats.Msg }

func (m natsMsg) Subject() string      { return m.Msg.Subject }
func (m natsMsg) Headers() nats.Header { return m.Header }
func (m natsMsg) Data() []byte         { return m.Msg.Data }

func TestUsageRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	long := strings.Repeat("é", events.MaxUsageRequestBytes) // 2 bytes a character
	m, err := events.NewUsage("/planner", events.Usage{Tenant: "acme", RunID: "r1", CallID: "c1", Step: 2,
		Tool: "get_weather", Request: long, ToolKey: "k", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "toolfleet.usage.get_weather.acme" || m.Header.Get(events.HeaderMsgID) != "c1@acme" {
		t.Fatalf("subject %s, msg id %s", m.Subject, m.Header.Get(events.HeaderMsgID))
	}
	e, u, err := events.DecodeUsage(natsMsg{m})
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != events.TypeUsage || u.Tool != "get_weather" || u.Tenant != "acme" || u.Step != 2 || !u.At.Equal(at) ||
		len(u.Request) != events.MaxUsageRequestBytes || !strings.HasPrefix(long, u.Request) {
		t.Fatalf("decoded %+v (request %d bytes)", u, len(u.Request))
	}
}

func TestUsageRefusesBadRecords(t *testing.T) {
	for _, u := range []events.Usage{
		{RunID: "r", CallID: "c", Tool: "bad tool", Request: "x"},
		{RunID: "r", CallID: "c", Tool: "t", Request: "  "},
		{CallID: "c", Tool: "t", Request: "x"},
		{RunID: "r", CallID: "c", Tool: "t", Tenant: "bad.tenant", Request: "x"},
	} {
		if _, err := events.NewUsage("/p", u); err == nil {
			t.Fatalf("NewUsage(%+v) accepted", u)
		}
	}
	// A record moved to another tenant's subject is refused.
	m, err := events.NewUsage("/p", events.Usage{Tenant: "acme", RunID: "r", CallID: "c", Tool: "t", Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	m.Subject = "toolfleet.usage.t.globex"
	m.Header.Set(events.HeaderMsgID, "c@globex")
	if _, _, err := events.DecodeUsage(natsMsg{m}); err == nil || !strings.Contains(err.Error(), "globex") {
		t.Fatalf("a record on another tenant's subject: %v", err)
	}
}
