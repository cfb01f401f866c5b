package ops

import (
	"io"
	"time"

	"github.com/rs/zerolog"
)

// TimeFormat is the timestamp of every log line: RFC 3339 in UTC with milliseconds, so
// that lines from several parts sort and line up.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// NewLogger returns a program's JSON logger: level, service name, timestamp, message.
func NewLogger(w io.Writer, service string, level zerolog.Level) zerolog.Logger {
	// A hook rather than zerolog.TimeFieldFormat: that is a global other loggers read.
	return zerolog.New(w).Level(level).Hook(timestamp{}).With().Str("service", service).Logger()
}

type timestamp struct{}

func (timestamp) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format(TimeFormat))
}
