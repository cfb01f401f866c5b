package builtin

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"
	_ "time/tzdata" // the zone database travels in the binary, so scratch images know every zone

	"github.com/toolfleet/toolfleet/pkg/tools"
)

//go:embed schemas/get_time.json
var getTimeSchema []byte

// GetTime is the tool get_time: the current time in an IANA time zone. It is safe and
// idempotent (a retry tells a later time, which is what the caller asked for).
type GetTime struct {
	// Timezone is an IANA zone name; empty means UTC.
	Timezone string `json:"timezone,omitempty"`
	// Format names the layout; empty means RFC3339. See schemas/get_time.json.
	Format string `json:"format,omitempty"`

	now func() time.Time // the clock; nil means time.Now. Register sets Config.Now.
}

// TimeResult is the output of [GetTime].
type TimeResult struct {
	Time      string `json:"time"`
	Timezone  string `json:"timezone"`
	UTCOffset string `json:"utc_offset"` // e.g. "+02:00"
	Unix      int64  `json:"unix"`       // seconds since 1970-01-01 UTC
}

// timeFormats maps the format names of the schema to Go layouts; "" marks a number.
var timeFormats = map[string]string{
	"RFC3339":     time.RFC3339,
	"RFC3339Nano": time.RFC3339Nano,
	"RFC1123":     time.RFC1123Z,
	"RFC822":      time.RFC822Z,
	"DateTime":    time.DateTime,
	"DateOnly":    time.DateOnly,
	"TimeOnly":    time.TimeOnly,
	"Kitchen":     time.Kitchen,
	"Unix":        "",
	"UnixMilli":   "",
}

// Definition describes get_time.
func (GetTime) Definition() tools.Definition {
	return tools.Definition{
		Type:        "function",
		Name:        "get_time",
		Description: "The current date and time in a time zone.",
		Parameters:  getTimeSchema,
		Safe:        true,
		Tags:        []string{"time"},
	}
}

// Run reads the clock. An unknown zone or format is invalid_tool_input.
func (g *GetTime) Run(ctx context.Context) (any, error) {
	zone := g.Timezone
	if zone == "" {
		zone = "UTC"
	}
	// "Local" would tell the executor's own setting, which differs between replicas.
	if zone == "Local" {
		return nil, invalidArg("/timezone", `"Local" is not an IANA time zone; name one such as "Europe/Paris"`)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, invalidArg("/timezone", fmt.Sprintf("unknown time zone %q; use an IANA name such as \"America/New_York\"", zone))
	}
	format := g.Format
	if format == "" {
		format = "RFC3339"
	}
	layout, ok := timeFormats[format]
	if !ok {
		return nil, invalidArg("/format", fmt.Sprintf("unknown format %q", format))
	}
	now := time.Now
	if g.now != nil {
		now = g.now
	}
	t := now().In(loc)
	var text string
	switch format {
	case "Unix":
		text = strconv.FormatInt(t.Unix(), 10)
	case "UnixMilli":
		text = strconv.FormatInt(t.UnixMilli(), 10)
	default:
		text = t.Format(layout)
	}
	return TimeResult{Time: text, Timezone: loc.String(), UTCOffset: t.Format("-07:00"), Unix: t.Unix()}, nil
}
