package pick

import (
	"errors"
	"fmt"
	"testing"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

func def(name, desc string) tools.Definition {
	return tools.Definition{Type: "function", Name: name, Description: desc, Safe: true,
		Parameters: []byte(`{"type":"object","properties":{}}`)}
}

func names(s *Snapshot) []string {
	var out []string
	for _, d := range s.Definitions() {
		out = append(out, d.Name)
	}
	return out
}

func TestCatalogIncremental(t *testing.T) {
	t.Parallel()
	cat, err := NewCatalog([]tools.Definition{def("get_weather", "current weather for a city"), def("send_email", "send an email")})
	if err != nil {
		t.Fatal(err)
	}
	s1 := cat.Snapshot()
	if s1.Len() != 2 {
		t.Fatalf("len %d, want 2", s1.Len())
	}
	if err := cat.Put(def("get_weather", "current weather and forecast for a city")); err != nil {
		t.Fatal(err)
	}
	cat.Remove("send_email", "no_such_tool")
	if err := cat.Put(def("translate_text", "translate text between languages")); err != nil {
		t.Fatal(err)
	}
	s2 := cat.Snapshot()
	if got := fmt.Sprint(names(s2)); got != "[get_weather translate_text]" {
		t.Errorf("registration order after changes = %s; a changed tool keeps its place", got)
	}
	// The old snapshot is untouched by later writes.
	if got := fmt.Sprint(names(s1)); got != "[get_weather send_email]" {
		t.Errorf("old snapshot changed: %s", got)
	}
	if d := s1.Definition(mustLookup(t, s1, "get_weather")); d.Description != "current weather for a city" {
		t.Errorf("old snapshot sees new definition %q", d.Description)
	}
	if s2.Version() <= s1.Version() {
		t.Errorf("version did not grow: %d then %d", s1.Version(), s2.Version())
	}
	// Document frequencies count live tools only: "email" is gone with send_email.
	if id, ok := s2.dict.get("email"); ok && s2.df[id] != 0 {
		t.Errorf("df(email) = %d after removal, want 0", s2.df[id])
	}
	if id, ok := s2.dict.get("forecast"); !ok || s2.df[id] != 1 {
		t.Errorf("forecast not indexed once after change")
	}
	// Putting an identical definition changes nothing, not even the version.
	v := cat.Snapshot().Version()
	if err := cat.Put(def("translate_text", "translate text between languages")); err != nil {
		t.Fatal(err)
	}
	if cat.Snapshot().Version() != v {
		t.Errorf("identical put made a new version")
	}
}

func mustLookup(t *testing.T, s *Snapshot, name string) DocID {
	t.Helper()
	id, ok := s.Lookup(name)
	if !ok {
		t.Fatalf("%s not in snapshot", name)
	}
	return id
}

func TestCatalogRejectsInvalidNames(t *testing.T) {
	t.Parallel()
	cat, _ := NewCatalog(nil)
	err := cat.Put(def("ok_tool", "fine"), def("bad name", "space"))
	if !errors.Is(err, tools.ErrInvalidDefinition) {
		t.Fatalf("err = %v, want invalid_definition", err)
	}
	if cat.Snapshot().Len() != 0 {
		t.Errorf("a failed batch changed the catalog")
	}
}

// TestCatalogCompaction churns a catalog until it compacts, and checks that ranking
// after compaction equals ranking of a freshly built catalog with the same tools.
func TestCatalogCompaction(t *testing.T) {
	t.Parallel()
	cat, _ := NewCatalog(nil)
	var want []tools.Definition
	for i := range 300 {
		d := def(fmt.Sprintf("tool_%d", i), fmt.Sprintf("does thing %d with widgets and gadgets number%d", i, i%7))
		if err := cat.Put(d); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			cat.Remove(d.Name)
		} else {
			want = append(want, d)
		}
	}
	s := cat.Snapshot()
	if s.deadCount() != s.nDead {
		t.Fatalf("dead bitmap has %d bits, counter says %d", s.deadCount(), s.nDead)
	}
	if s.nDead > s.live/4+64 {
		t.Errorf("%d dead of %d live: compaction did not run", s.nDead, s.live)
	}
	fresh, _ := NewCatalog(want)
	opts := Options{MaxCandidates: 10, MinScore: new(0.0)}
	for _, q := range []string{"widgets number3", "gadgets thing 5", "number6"} {
		a, err := Pick(t.Context(), q, cat, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Pick(t.Context(), q, fresh, opts)
		if fmt.Sprint(resultNames(a)) != fmt.Sprint(resultNames(b)) {
			t.Errorf("%q: churned %v, fresh %v", q, resultNames(a), resultNames(b))
		}
		for i := range a {
			if d := a[i].Score - b[i].Score; d > 1e-6 || d < -1e-6 {
				t.Errorf("%q: %s scores %v churned, %v fresh", q, a[i].Name, a[i].Score, b[i].Score)
			}
		}
	}
}

func resultNames(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}
