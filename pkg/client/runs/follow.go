package runs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxReconnects bounds the reconnections of a followed stream in a row that bring no
// event: a planner that stays away ends the follow with the last error.
const maxReconnects = 8

// Follow streams the events of run id, in order, from its first (after 0) or from the
// one after the event whose Seq is after, until the run is done (the done event of its
// last turn: a run continued by a follow-up has one per turn), an error or the end of
// ctx. A dropped connection is resumed where it stopped (Last-Event-ID), so no event is
// missed or repeated; an error ends the sequence (an *[Error] for the planner's
// refusal, e.g. 404 for an unknown run). Stop ranging to stop following.
func (c *Client) Follow(ctx context.Context, id string, after uint64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		failures := 0
		for {
			done, got, err := c.followOnce(ctx, id, &after, yield)
			if done {
				return
			}
			if err == errTurnDone {
				failures = 0
				continue
			}
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			if _, refused := err.(*Error); refused || ctx.Err() != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(Event{}, err)
				return
			}
			if got {
				failures = 0
			}
			failures++
			if failures > maxReconnects {
				yield(Event{}, fmt.Errorf("runs: follow %s: %w", id, err))
				return
			}
			// Back off a little more each time: 100ms, 200ms, … up to 2s.
			wait := min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)
			select {
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			case <-time.After(wait):
			}
		}
	}
}

// errTurnDone ends a connection at a done event: the follow goes on after it.
var errTurnDone = errors.New("a turn's done event")

// followOnce reads one connection of the stream, advancing *after past each event given
// to yield. done is true when the follow is over (the done event, a 204, or the caller
// stopped); got whether any event came.
func (c *Client) followOnce(ctx context.Context, id string, after *uint64, yield func(Event, error) bool) (done, got bool, err error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return false, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(*after, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent: // the done event was seen already
		return true, false, nil
	case resp.StatusCode != http.StatusOK:
		return false, false, readError(resp)
	}
	for ev, err := range readSSE(resp.Body) {
		if err != nil {
			return false, got, err
		}
		e := Event{What: ev.event}
		if e.Seq, err = strconv.ParseUint(ev.id, 10, 64); err != nil {
			return false, got, fmt.Errorf("runs: an event without a numeric id (%q)", ev.id)
		}
		if err := json.Unmarshal([]byte(ev.data), &e.Data); err != nil {
			return false, got, fmt.Errorf("runs: event %d (%s): %w", e.Seq, e.What, err)
		}
		fillTool(&e.Data)
		got, *after = true, e.Seq
		if !yield(e, nil) {
			return true, got, nil
		}
		if e.What == "done" {
			// The done event of a turn. Asking again after it is answered 204 when it is
			// the run's last; a run continued since (a follow-up) streams its next turn.
			return false, got, errTurnDone
		}
	}
	return false, got, nil
}

// sseEvent is one Server-Sent Event as the planner sends it.
type sseEvent struct{ id, event, data string }

// readSSE parses a text/event-stream: fields up to a blank line make an event; comments
// (":") and unknown fields are skipped. The planner's events are small, one data line
// each; a line is allowed up to 4 MiB.
func readSSE(r io.Reader) iter.Seq2[sseEvent, error] {
	return func(yield func(sseEvent, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				if data != nil || ev.event != "" {
					ev.data = strings.Join(data, "\n")
					if !yield(ev, nil) {
						return
					}
				}
				ev, data = sseEvent{}, nil
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.id = value
			case "event":
				ev.event = value
			case "data":
				data = append(data, value)
			}
		}
		if err := sc.Err(); err != nil {
			yield(sseEvent{}, err)
		}
	}
}

// fillTool sets Tool from the detail when the event names its tool only there (the
// planner's call events: tool_called and approval_needed say "tool", tool_result and
// tool_error carry the call record, whose "name" it is).
func fillTool(d *EventData) {
	if d.Tool != "" || len(d.Detail) == 0 || d.Detail[0] != '{' {
		return
	}
	var detail struct{ Tool, Name string }
	if json.Unmarshal(d.Detail, &detail) != nil {
		return
	}
	d.Tool = detail.Tool
	if d.Tool == "" && d.CallID != "" {
		d.Tool = detail.Name
	}
}
