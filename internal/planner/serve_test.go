package planner

import (
	"strings"
	"testing"
)

func TestFlagsReadEnvironmentAndRefuseMalformedValues(t *testing.T) {
	t.Setenv("TOOLFLEET_HTTP_ADDR", "127.0.0.1:9999")
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "3")
	c, err := Flags([]string{"-script", "demo=demo.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "127.0.0.1:9999" || c.StreamReplicas != 3 || len(c.Scripts) != 1 {
		t.Fatalf("config = %+v", c)
	}
	t.Setenv("TOOLFLEET_STREAM_REPLICAS", "three")
	if _, err := Flags(nil); err == nil || !strings.Contains(err.Error(), "TOOLFLEET_STREAM_REPLICAS") {
		t.Fatalf("Flags with TOOLFLEET_STREAM_REPLICAS=three = %v, want an error naming it", err)
	}
}
