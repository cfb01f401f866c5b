package ops

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// A log line is JSON with the service, the level and a UTC timestamp in milliseconds;
// lines below the level are dropped; deprecated settings are warned about once.
func TestLogger(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	log := Config{LogLevel: zerolog.InfoLevel, LogTo: &out, Deprecated: []string{"-http is deprecated"}}.Logger("picker")
	log.Debug().Msg("catalog re-indexed")
	log.Info().Int("tools", 3).Msg("catalog loaded")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines:\n%s", out.String())
	}
	var warn, info map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &warn); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &info); err != nil {
		t.Fatal(err)
	}
	if warn["level"] != "warn" || warn["message"] != "-http is deprecated" {
		t.Errorf("first line %v, want the deprecation warning", warn)
	}
	if info["level"] != "info" || info["service"] != "picker" || info["message"] != "catalog loaded" || info["tools"] != 3.0 {
		t.Errorf("line %v", info)
	}
	ts, _ := info["time"].(string)
	at, err := time.Parse(TimeFormat, ts)
	if err != nil || len(ts) != len("2006-01-02T15:04:05.000Z") || time.Since(at) > time.Minute {
		t.Errorf("time %q (%v), want UTC with milliseconds", ts, err)
	}
}
