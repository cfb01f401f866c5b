package events

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// # Shards
//
// One stream has one leader: in a cluster every call and result of the fleet would go
// through one node, and one node stores about 25k calls/s whatever else it has. With
// [Config].Shards = P > 1 the calls and the results are split over P streams each,
// TOOLFLEET_CALLS_<n> and TOOLFLEET_RESULTS_<n> (n = 0…P-1), whose leaders JetStream
// spreads over the cluster's nodes. P = 1 (the default) keeps the single streams
// TOOLFLEET_CALLS and TOOLFLEET_RESULTS.
//
// Callers do not see the shards:
//
//   - Calls: a caller publishes to the documented subject, toolfleet.call.<tool>[.<tenant>.<role>].
//     The NATS account maps it, at random with equal weights, to
//     toolfleet.shard.<n>.call.<tool>[.<tenant>.<role>] ([Config.CallMappings]: server configuration, which
//     [Config.MappingsConf] writes for nats-server), and shard n's stream stores it back
//     under its original subject (a stream subject transform), so consumers, filters and
//     the identity tokens are those of an unsharded fleet. Random rather than by a key:
//     the call id is not in the subject, and a hot tool must use every shard. Executors
//     consume every shard. (A core subscriber of calls — nobody in the fleet is one —
//     sees the mapped subject, toolfleet.shard.<n>.call.<…>.)
//   - Results: an executor publishes a result to toolfleet.shard.<n>.result.<run>.<call>[.<tenant>],
//     n = [Config.ResultShard] of its subject (FNV-1a, so a call's result always has the
//     same shard and "one result per call" still holds: the expected-last-sequence check
//     is per shard). The shard's stream stores it under toolfleet.result.<…> and
//     republishes it there once stored: subscribers of toolfleet.result.<run>.<call> get
//     it as before, and a direct get of that subject on TOOLFLEET_RESULTS_<n> finds it.
//
// What stays single: the events, dead-letter and payload streams, the buckets and the
// planner's streams. They carry a message per approval, cancel, dead letter, large
// payload or run step, not per call.
//
// Changing P on a live system: create the new shards' streams and start executors with
// the new P (they consume every shard, old and new) before changing the server's
// mappings (a configuration reload); lower P only after the shards to remove are empty.
// A result's shard depends on P, so a call re-published across the change may not find
// its stored result: an idempotent call may then run again (a second result is stored on
// the new shard); a non-idempotent one still runs once (its start marker does not
// depend on P).

// MaxShards bounds [Config].Shards: subject mapping weights are whole percents.
const MaxShards = 100

const shardPrefix = "toolfleet.shard."

// AllResultShards matches the subjects results are published to with several shards,
// toolfleet.shard.<n>.result.<run>.<call>[.<tenant>] (the results streams' subjects).
const AllResultShards = "toolfleet.shard.*.result.>"

// shards is c.Shards with its default.
func (c Config) shards() int { return max(c.Shards, 1) }

// Sharded reports whether calls and results are split over more than one stream.
func (c Config) Sharded() bool { return c.shards() > 1 }

// CallStreams names the calls streams, one per shard.
func (c Config) CallStreams() []string { return c.shardNames(StreamCalls) }

// ResultStreams names the results streams, one per shard.
func (c Config) ResultStreams() []string { return c.shardNames(StreamResults) }

func (c Config) shardNames(base string) []string {
	names := make([]string, c.shards())
	for n := range names {
		names[n] = c.shardName(base, n)
	}
	return names
}

// shardName is shard n's stream of base: base itself with one shard, base_<n> with more.
func (c Config) shardName(base string, n int) string {
	if !c.Sharded() {
		return base
	}
	return base + "_" + strconv.Itoa(n)
}

// ResultShard is the shard whose results stream stores the result subject
// toolfleet.result.<run>.<call>[.<tenant>]: FNV-1a of the subject, modulo P.
func (c Config) ResultShard(resultSubject string) int {
	if !c.Sharded() {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(resultSubject))
	return int(h.Sum32() % uint32(c.shards()))
}

// ResultStream names the results stream that stores resultSubject.
func (c Config) ResultStream(resultSubject string) string {
	return c.shardName(StreamResults, c.ResultShard(resultSubject))
}

// ResultPublishSubject is where a result on resultSubject is published: the subject
// itself with one shard, toolfleet.shard.<n>.<rest> with more.
func (c Config) ResultPublishSubject(resultSubject string) string {
	if !c.Sharded() {
		return resultSubject
	}
	return shardSubject(c.ResultShard(resultSubject), resultSubject)
}

// shardSubject is subject (toolfleet.<rest>) under shard n: toolfleet.shard.<n>.<rest>.
func shardSubject(n int, subject string) string {
	return shardPrefix + strconv.Itoa(n) + "." + strings.TrimPrefix(subject, SubjectRoot+".")
}

// SubjectMapping is one subject mapping of the NATS account: a message published to
// Source goes to one of Destinations, picked at random by weight (percent).
type SubjectMapping struct {
	Source       string
	Destinations []WeightedSubject
}

// WeightedSubject is a mapping destination and its weight in percent.
type WeightedSubject struct {
	Subject string
	Weight  uint8
}

// CallMappings are the account's subject mappings that spread calls over the shards
// (none with one shard): toolfleet.call.> to toolfleet.shard.<n>.call.>, weights as equal
// as whole percents allow. One mapping for every subject under toolfleet.call, so that a
// malformed one is stored (and answered, see pkg/executor) as with one stream. NATS
// checks publish permissions on the mapped subject, so a user allowed toolfleet.call.X
// must also be allowed toolfleet.shard.*.call.X (the shipped users are).
func (c Config) CallMappings() []SubjectMapping {
	if !c.Sharded() {
		return nil
	}
	p := c.shards()
	m := SubjectMapping{Source: AllCalls}
	for n := range p {
		w := 100 / p
		if n < 100%p {
			w++
		}
		m.Destinations = append(m.Destinations, WeightedSubject{Subject: shardPrefix + strconv.Itoa(n) + ".call.>", Weight: uint8(w)})
	}
	return []SubjectMapping{m}
}

// MappingsConf writes [Config.CallMappings] as a nats-server configuration block, to put
// in the account that toolfleet uses (or at the top level for the global account). It is
// empty with one shard.
func (c Config) MappingsConf() string {
	ms := c.CallMappings()
	if len(ms) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# toolfleet: calls spread over %d shards (events.Config shards: %d)\nmappings: {\n", c.shards(), c.shards())
	for _, m := range ms {
		fmt.Fprintf(&b, "  %q: [\n", m.Source)
		for _, d := range m.Destinations {
			fmt.Fprintf(&b, "    {destination: %q, weight: \"%d%%\"}\n", d.Subject, d.Weight)
		}
		b.WriteString("  ]\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// shardStreams returns the calls and results streams of P > 1 shards from the unsharded
// calls and results configurations.
func (c Config) shardStreams(calls, results jetstream.StreamConfig) []jetstream.StreamConfig {
	var out []jetstream.StreamConfig
	for n := range c.shards() {
		for _, s := range []struct {
			cfg  jetstream.StreamConfig
			name string
			kind string
		}{{calls, c.CallStreams()[n], "call"}, {results, c.ResultStreams()[n], "result"}} {
			sc := s.cfg
			sc.Name = s.name
			sc.Description = fmt.Sprintf("%s (shard %d of %d)", s.cfg.Description, n, c.shards())
			in := shardPrefix + strconv.Itoa(n) + "." + s.kind + ".>"
			stored := SubjectRoot + "." + s.kind + ".>"
			sc.Subjects = []string{in}
			// Stored under the subject the caller knows.
			sc.SubjectTransform = &jetstream.SubjectTransformConfig{Source: in, Destination: stored}
			if s.kind == "result" {
				// Subscribers of toolfleet.result.<run>.<call> see a result once stored.
				sc.RePublish = &jetstream.RePublish{Source: stored, Destination: stored}
			}
			out = append(out, sc)
		}
	}
	return out
}
