package pickerservice

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolfleet/toolfleet/internal/jsutil"
	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/events"
	"github.com/toolfleet/toolfleet/pkg/pick"
)

func publishUsage(t *testing.T, js jetstream.JetStream, u events.Usage) {
	t.Helper()
	m, err := events.NewUsage("/test", u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func learning(t *testing.T) Option {
	t.Helper()
	l, err := pick.NewLearned(pick.LearnConfig{RefreshEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	return WithLearning(l)
}

// A learning replica replays the usage stream before it is ready, follows it after, and
// ranks per tenant; a replica started later rebuilds the same from the stream. A record
// that does not decode is skipped, and a record repeated (same call id) counts once.
func TestLearningReplaysAndFollowsUsage(t *testing.T) {
	t.Parallel()
	b := setupCatalog(t, catalog)
	js, err := jetstream.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := jsutil.EnsureUsage(context.Background(), js, events.Config{}); err != nil {
		t.Fatal(err)
	}
	for i, r := range []string{"say this in french", "how do you say hello in german", "say thanks in italian"} {
		publishUsage(t, js, events.Usage{Tenant: "acme", RunID: "run", CallID: "c" + string(rune('0'+i)), Tool: "translate_text", Request: r})
	}
	publishUsage(t, js, events.Usage{Tenant: "acme", RunID: "run", CallID: "c0", Tool: "translate_text", Request: "say this in french"})
	if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "toolfleet.usage.translate_text.acme", Data: []byte("not an event")}); err != nil {
		t.Fatal(err)
	}
	b.svc = b.startReplica(t, learning(t))
	const acme = `{"input":"say goodbye in french","options":{"tenant":"acme","minScore":0,"debug":true}}`
	r, names := pickNames(t, b.nc, acme)
	if len(names) == 0 || names[0] != "translate_text" || r.Results[0].Provenance.Scorer != pick.LearnedScorerName ||
		!strings.Contains(r.Results[0].Reason, "from 3 requests") {
		t.Fatalf("acme's pick %+v; want translate_text first, learned from 3 requests", r.Results)
	}
	if st := b.svc.Learned().Stats(); st.Folded != 3 || st.Dropped != 0 {
		t.Fatalf("learned %+v; want 3 records (the repeat dropped by the stream, the bad one skipped)", st)
	}
	// Another tenant, and the cold scorer by name, rank without acme's usage.
	for _, body := range []string{`{"input":"say goodbye in french","options":{"tenant":"globex","minScore":0}}`,
		`{"input":"say goodbye in french","options":{"tenant":"acme","scorer":"bm25","minScore":0}}`} {
		if r, names := pickNames(t, b.nc, body); len(names) > 0 && strings.Contains(r.Results[0].Reason, "learned") {
			t.Fatalf("%s: %+v learned from acme", body, r.Results)
		}
	}
	// Followed live: a new record counts at once.
	publishUsage(t, js, events.Usage{Tenant: "acme", RunID: "run2", CallID: "c9", Tool: "send_email", Request: "notify bob about lunch"})
	natstest.Eventually(t, waitTimeout, "the live record learned", func() bool {
		_, names := pickNames(t, b.nc, `{"input":"notify alice about dinner","options":{"tenant":"acme","minScore":0}}`)
		return len(names) > 0 && names[0] == "send_email"
	})
	// A replica started now rebuilds the same from the stream.
	second := b.startReplica(t, learning(t))
	if st := second.Learned().Stats(); st.Folded != 4 {
		t.Fatalf("the second replica learned %d records, want 4", st.Folded)
	}
	res, err := pick.Pick(context.Background(), "say goodbye in french", second.Catalog(),
		pick.Options{Scorer: second.Learned().Scorer("acme"), MinScore: new(0.0)})
	if err != nil || len(res) == 0 || res[0].Name != "translate_text" {
		t.Fatalf("second replica's pick %+v, %v", res, err)
	}
}

// A service that does not learn refuses the usage scorer by name.
func TestUsageScorerNeedsLearning(t *testing.T) {
	t.Parallel()
	b := setup(t, catalog)
	msg := request(t, b.nc, `{"input":"weather","options":{"scorer":"usage"}}`)
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != CodeBadRequest {
		t.Fatalf("code %q, want %s", code, CodeBadRequest)
	}
}

// A picker that cannot open the usage stream (here another stream owns its subjects)
// says so and serves cold picks rather than never being ready.
func TestLearningWithoutUsageStreamServesCold(t *testing.T) {
	t.Parallel()
	b := setupCatalog(t, catalog)
	js, err := jetstream.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "SQUATTER", Subjects: []string{events.AllUsage}}); err != nil {
		t.Fatal(err)
	}
	b.svc = b.startReplica(t, learning(t)) // waits for Ready
	if _, names := pickNames(t, b.nc, `{"input":"weather in Paris","options":{"tenant":"acme"}}`); len(names) == 0 || names[0] != "get_weather" {
		t.Fatalf("cold pick %v, want get_weather", names)
	}
}
