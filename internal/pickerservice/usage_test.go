package pickerservice

import (
	"context"
	"fmt"
	"slices"
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

// Each tenant's settings, chosen by self-tuning from its own usage once the replay is
// done, are in the metrics with the held-out score they were chosen on; a tenant with
// too little usage shows the defaults, untuned.
func TestLearningShowsEachTenantsTuning(t *testing.T) {
	t.Parallel()
	b := setupCatalog(t, catalog)
	js, err := jetstream.New(b.nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := jsutil.EnsureUsage(context.Background(), js, events.Config{}); err != nil {
		t.Fatal(err)
	}
	// acme asks for translations in words the tools' text does not have.
	for i := range 20 {
		publishUsage(t, js, events.Usage{Tenant: "acme", RunID: fmt.Sprint("run", i), CallID: fmt.Sprint("c", i),
			Tool: "translate_text", Request: fmt.Sprintf("hola amigo %d, que tal", i)})
	}
	publishUsage(t, js, events.Usage{Tenant: "globex", RunID: "g", CallID: "g1", Tool: "get_weather", Request: "rain in Oslo?"})
	l, err := pick.NewLearned(pick.LearnConfig{RefreshEvery: -1, MinHeldOut: 2})
	if err != nil {
		t.Fatal(err)
	}
	b.svc = b.startReplica(t, WithLearning(l))
	gauge := func(name string, labels ...string) (float64, bool) {
		families, err := b.svc.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				var got []string
				for _, lp := range m.GetLabel() {
					got = append(got, lp.GetName()+"="+lp.GetValue())
				}
				if slices.Equal(got, labels) {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	natstest.Eventually(t, waitTimeout, "acme's settings tuned", func() bool {
		v, ok := gauge("toolfleet_picker_tuning_tuned", "tenant=acme")
		return ok && v == 1
	})
	acme := l.Tunings()[0]
	if acme.Tenant != "acme" || acme.HeldOut != 4 || !(acme.Score > 0) {
		t.Fatalf("acme's tuning %+v; want 4 held-out runs scored", acme)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolfleet_picker_tuning_weight", []string{"tenant=acme"}, acme.Tuning.Weight},
		{"toolfleet_picker_tuning_co_usage", []string{"tenant=acme"}, acme.Tuning.CoUsage},
		{"toolfleet_picker_tuning_power", []string{"tenant=acme"}, float64(acme.Tuning.Power)},
		{"toolfleet_picker_tuning_held_out_runs", []string{"tenant=acme"}, 4},
		{"toolfleet_picker_tuning_held_out_ndcg", []string{"setting=chosen", "tenant=acme"}, acme.Score},
		{"toolfleet_picker_tuning_held_out_ndcg", []string{"setting=defaults", "tenant=acme"}, acme.DefaultScore},
		{"toolfleet_picker_tuning_tuned", []string{"tenant=globex"}, 0},
		{"toolfleet_picker_tuning_weight", []string{"tenant=globex"}, 1},
	} {
		if got, ok := gauge(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}
