package builtin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// fixedClock is 2024-07-01 12:30:45.123456789 UTC, a summer date so that zones with
// daylight saving time show it.
func fixedClock() time.Time { return time.Date(2024, 7, 1, 12, 30, 45, 123456789, time.UTC) }

func TestGetTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, zone, format string
		want               TimeResult
	}{
		{"defaults to UTC and RFC3339", "", "", TimeResult{"2024-07-01T12:30:45Z", "UTC", "+00:00", 1719837045}},
		{"zone with daylight saving", "Europe/Paris", "", TimeResult{"2024-07-01T14:30:45+02:00", "Europe/Paris", "+02:00", 1719837045}},
		{"negative offset", "America/New_York", "DateTime", TimeResult{"2024-07-01 08:30:45", "America/New_York", "-04:00", 1719837045}},
		{"half-hour zone", "Asia/Kolkata", "Kitchen", TimeResult{"6:00PM", "Asia/Kolkata", "+05:30", 1719837045}},
		{"nanoseconds", "UTC", "RFC3339Nano", TimeResult{"2024-07-01T12:30:45.123456789Z", "UTC", "+00:00", 1719837045}},
		{"unix seconds", "Asia/Tokyo", "Unix", TimeResult{"1719837045", "Asia/Tokyo", "+09:00", 1719837045}},
		{"unix milliseconds", "", "UnixMilli", TimeResult{"1719837045123", "UTC", "+00:00", 1719837045}},
		{"date only", "Pacific/Auckland", "DateOnly", TimeResult{"2024-07-02", "Pacific/Auckland", "+12:00", 1719837045}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := &GetTime{Timezone: tt.zone, Format: tt.format, now: fixedClock}
			out, err := g.Run(context.Background())
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := out.(TimeResult); got != tt.want {
				t.Fatalf("Run = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGetTimeUsesTheRealClockByDefault(t *testing.T) {
	t.Parallel()
	before := time.Now().Unix()
	out, err := (&GetTime{}).Run(context.Background())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := out.(TimeResult)
	if got.Unix < before || got.Unix > time.Now().Unix() {
		t.Fatalf("Run = %+v, want a time between %d and now", got, before)
	}
	if _, err := time.Parse(time.RFC3339, got.Time); err != nil {
		t.Fatalf("time %q is not RFC3339: %v", got.Time, err)
	}
}

func TestGetTimeRefusesUnknownZonesAndFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, zone, format, pointer, message string
	}{
		{"unknown zone", "Mars/Olympus_Mons", "", "/timezone", `unknown time zone "Mars/Olympus_Mons"`},
		{"path in zone", "../../etc/passwd", "", "/timezone", "unknown time zone"},
		{"Local is not a zone", "Local", "", "/timezone", "not an IANA time zone"},
		{"unknown format", "UTC", "2006-01-02", "/format", `unknown format "2006-01-02"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := (&GetTime{Timezone: tt.zone, Format: tt.format, now: fixedClock}).Run(context.Background())
			var te *tools.Error
			if !errors.As(err, &te) || te.Code != tools.CodeInvalidInput {
				t.Fatalf("Run error = %v, want invalid_tool_input", err)
			}
			if !strings.Contains(te.Message, tt.message) || len(te.Violations) != 1 || te.Violations[0].Pointer != tt.pointer {
				t.Fatalf("Run error = %+v, want %q at %s", te, tt.message, tt.pointer)
			}
		})
	}
}
