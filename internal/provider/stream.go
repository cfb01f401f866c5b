package provider

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// streamFormat is what one provider's wire format adds to the streaming skeleton
// ([transport.stream]): how to read one event and, once the stream has ended, whether it
// was complete and what it said. The skeleton does the rest the same for every
// provider: the request and its retries, the reading, and the errors.
type streamFormat interface {
	// event reads one event (an SSE event, or one NDJSON line in its Data), calling
	// onDelta for the text and the tool calls it completes. It returns an *APIError for
	// an error the provider sent mid-stream, a malformed error for what cannot be read,
	// or errStreamEnd to stop reading.
	event(ev sseEvent, onDelta func(Delta)) error
	// missing names what the stream lacked to be complete ("message_stop"), or is ""
	// when it was complete.
	missing() string
	// response returns what the stream said, calling onDelta for the tool calls only
	// the whole stream completes.
	response(onDelta func(Delta)) (*Response, error)
}

// errStreamEnd, from streamFormat.event, ends the reading of a complete stream.
var errStreamEnd = errors.New("end of stream")

// framing splits a response body into events.
type framing func(r io.Reader, fn func(sseEvent) error) error

// stream posts a streaming request to path and reads the answer, event by event, in f's
// wire format. A stream that ends before it is complete is refused as malformed, or with
// the context's error when the context ended it.
func (t *transport) stream(ctx context.Context, path string, body []byte, split framing, f streamFormat, onDelta func(Delta)) (*Response, error) {
	resp, err := t.post(ctx, path, body, true)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	err = split(resp.Body, func(ev sseEvent) error { return f.event(ev, onDelta) })
	if err != nil && !errors.Is(err, errStreamEnd) {
		return nil, readErr(ctx, t.provider, err)
	}
	if what := f.missing(); what != "" {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", t.provider, ctx.Err())
		}
		return nil, malformed(t.provider, "stream ended before %s", what)
	}
	out, err := f.response(onDelta)
	if err != nil {
		return nil, err
	}
	return finish(out), nil
}

// streamError is the *APIError of an error the provider sent mid-stream: body is an
// error envelope parseErrorBody reads, raw what to quote when it says nothing.
func streamError(provider string, body, raw []byte) *APIError {
	e := &APIError{Provider: provider, Attempts: 1}
	e.Type, e.Message = parseErrorBody(body)
	if e.Message == "" {
		e.Message = snippet(raw)
	}
	return e
}

// readNDJSON calls fn with each non-blank line of a stream of JSON lines (as the Data
// of an event, without surrounding whitespace). It stops at the end of the stream or at
// fn's first error.
func readNDJSON(r io.Reader, fn func(sseEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(sseEvent{Data: line}); err != nil {
			return err
		}
	}
	return sc.Err()
}
