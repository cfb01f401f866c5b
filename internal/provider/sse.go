package provider

import (
	"bufio"
	"bytes"
	"io"
)

// sseEvent is one Server-Sent Event: its event type (may be empty) and its data lines
// joined by newlines.
type sseEvent struct {
	Event string
	Data  []byte
}

// maxLine bounds one line of a stream; a tool call's arguments can arrive in one line.
const maxLine = 16 << 20

// readSSE calls fn for each event of an SSE stream (the text/event-stream format:
// "event:" and "data:" fields, a blank line ends an event, lines starting with ':' are
// comments). It stops at the end of the stream or at fn's first error.
func readSSE(r io.Reader, fn func(sseEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var ev sseEvent
	var data [][]byte
	dispatch := func() error {
		if len(data) == 0 {
			ev = sseEvent{}
			return nil
		}
		ev.Data = bytes.Join(data, []byte("\n"))
		err := fn(ev)
		ev, data = sseEvent{}, nil
		return err
	}
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Event = string(value)
		case "data":
			data = append(data, bytes.Clone(value))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return dispatch() // a last event without its blank line
}
