package events_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolfleet/toolfleet/pkg/events"
)

// One shard is today's layout; P shards are P calls and P results streams, each storing
// under the subject callers know.
func TestShardStreams(t *testing.T) {
	t.Parallel()
	one := events.Config{}
	if got := one.CallStreams(); len(got) != 1 || got[0] != events.StreamCalls || one.ResultStream("toolfleet.result.r.c") != events.StreamResults {
		t.Errorf("one shard: calls %v, results %s", got, one.ResultStream("toolfleet.result.r.c"))
	}
	if one.ResultPublishSubject("toolfleet.result.r.c") != "toolfleet.result.r.c" || one.CallMappings() != nil || one.MappingsConf() != "" {
		t.Error("one shard: results are not published where they are stored, or calls are mapped")
	}
	cfg := events.Config{Shards: 3}
	byName := map[string]bool{}
	for _, sc := range cfg.Streams() {
		byName[sc.Name] = true
		if !strings.HasPrefix(sc.Name, events.StreamCalls+"_") && !strings.HasPrefix(sc.Name, events.StreamResults+"_") {
			continue
		}
		if sc.SubjectTransform == nil || len(sc.Subjects) != 1 || sc.SubjectTransform.Source != sc.Subjects[0] ||
			!strings.HasPrefix(sc.Subjects[0], "toolfleet.shard.") {
			t.Errorf("%s: subjects %v, transform %+v", sc.Name, sc.Subjects, sc.SubjectTransform)
		}
		isResults := strings.HasPrefix(sc.Name, events.StreamResults)
		if isResults != (sc.RePublish != nil) || (isResults && sc.RePublish.Destination != events.AllResults) {
			t.Errorf("%s: republish %+v", sc.Name, sc.RePublish)
		}
	}
	for _, name := range append(cfg.CallStreams(), cfg.ResultStreams()...) {
		if !byName[name] {
			t.Errorf("no stream %s among %v", name, byName)
		}
	}
	if byName[events.StreamCalls] || byName[events.StreamResults] {
		t.Error("the unsharded streams are still there")
	}
	if err := (events.Config{Shards: events.MaxShards + 1}).Validate(); err == nil {
		t.Error("101 shards validated")
	}
}

// A result's shard depends on its subject alone, every shard gets some, and the subject
// it is published to names that shard.
func TestResultShard(t *testing.T) {
	t.Parallel()
	cfg := events.Config{Shards: 4}
	seen := map[int]int{}
	for i := range 1000 {
		subj := "toolfleet.result.run." + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "." + string(rune('A'+i/26%26))
		n := cfg.ResultShard(subj)
		if n != cfg.ResultShard(subj) || n < 0 || n >= 4 {
			t.Fatalf("shard of %s: %d", subj, n)
		}
		seen[n]++
		want := "toolfleet.shard." + string(rune('0'+n)) + ".result." + strings.TrimPrefix(subj, "toolfleet.result.")
		if got := cfg.ResultPublishSubject(subj); got != want {
			t.Fatalf("publish subject of %s: %s, want %s", subj, got, want)
		}
	}
	for n := range 4 {
		if seen[n] < 100 {
			t.Errorf("shard %d got %d of 1000 results", n, seen[n])
		}
	}
}

// What MappingsConf writes is a server configuration nats-server accepts, mapping calls
// to every shard with weights that add up to 100%, for any number of shards.
func TestMappingsConfIsAServerConfig(t *testing.T) {
	t.Parallel()
	for _, p := range []int{2, 3, 7, 100} {
		cfg := events.Config{Shards: p}
		file := filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(file, []byte("jetstream: enabled\n"+cfg.MappingsConf()), 0o600); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(file)
		if err != nil {
			t.Fatalf("%d shards: %v\n%s", p, err, cfg.MappingsConf())
		}
		opts.NoSigs, opts.StoreDir = true, t.TempDir()
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		srv.Shutdown()
		if !srv.GlobalAccount().RemoveMapping(events.AllCalls) {
			t.Fatalf("%d shards: the server has no mapping of %s", p, events.AllCalls)
		}
		ms := cfg.CallMappings()
		if len(ms) != 1 || ms[0].Source != events.AllCalls || len(ms[0].Destinations) != p {
			t.Fatalf("%d shards: mappings %+v", p, ms)
		}
		total := 0
		for n, d := range ms[0].Destinations {
			total += int(d.Weight)
			if d.Subject != "toolfleet.shard."+strconv.Itoa(n)+".call.>" || !strings.Contains(cfg.MappingsConf(), d.Subject) {
				t.Errorf("%d shards: destination %d is %s", p, n, d.Subject)
			}
		}
		if total != 100 {
			t.Errorf("%d shards: weights add up to %d%%", p, total)
		}
	}
}
