package pickerservice

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/toolfleet/toolfleet/internal/testsupport/natstest"
	"github.com/toolfleet/toolfleet/pkg/tools"
)

// BenchmarkServicePick measures one pick request/reply through the micro service on
// embedded JetStream (1,000 tools, default options), against a bare micro echo
// service on the same server measured in the same run: the difference is what picking
// costs over the transport. Reports p50/p99 of each and the ratio of p50s.
func BenchmarkServicePick(b *testing.B) {
	defs := make([]tools.Definition, 0, 1000)
	for i := range 1000 {
		defs = append(defs, tool(fmt.Sprintf("tool_%d", i), fmt.Sprintf("does task %d on widget%d with gadget%d", i, i%37, i%101)))
	}
	defs = append(defs, catalog...)
	bb := setup(b, defs)
	natstest.Eventually(b, waitTimeout, "catalog", func() bool { return bb.svc.Catalog().Snapshot().Len() == len(defs) })

	echo, err := micro.AddService(bb.srv.Connect(), micro.Config{Name: "echo", Version: "0.0.1",
		Endpoint: &micro.EndpointConfig{Subject: "bench.echo", Handler: micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(r.Data()) })}})
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Stop()

	body := []byte(`{"input":"translate this text about the weather to French"}`)
	measure := func(subject string, n int) []time.Duration {
		lat := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			msg, err := bb.nc.Request(subject, body, 5*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if msg.Header.Get(micro.ErrorCodeHeader) != "" {
				b.Fatalf("error reply: %s", msg.Header.Get(micro.ErrorHeader))
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat
	}
	var pickLat, echoLat []time.Duration
	for b.Loop() {
		pickLat = append(pickLat, measure(PickSubject, 1)...)
	}
	echoLat = measure("bench.echo", max(len(pickLat), 200))
	slices.Sort(pickLat)
	p := func(l []time.Duration, q int) float64 { return float64(l[len(l)*q/100].Nanoseconds()) / 1e3 }
	b.ReportMetric(p(pickLat, 50), "pick-p50-µs")
	b.ReportMetric(p(pickLat, 99), "pick-p99-µs")
	b.ReportMetric(p(echoLat, 50), "echo-p50-µs")
	b.ReportMetric(p(echoLat, 99), "echo-p99-µs")
	b.ReportMetric(p(pickLat, 50)/p(echoLat, 50), "p50-ratio")
}
