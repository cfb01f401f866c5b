package toolsfile

import (
	"bytes"
	"encoding/json"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// outputValue turns what a command printed or an endpoint answered into the tool's
// output. The contract, the same for both runners:
//   - one JSON value (surrounding whitespace ignored) is the output as is;
//   - nothing but whitespace is null;
//   - anything else is text, and the output is that text as a JSON string (one trailing
//     newline removed), so that a plain program such as `date` is a tool too.
func outputValue(b []byte) json.RawMessage {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(trimmed) {
		return json.RawMessage(trimmed)
	}
	text := bytes.TrimSuffix(b, []byte("\n"))
	text = bytes.TrimSuffix(text, []byte("\r"))
	s, _ := tools.MarshalJSON(string(text)) // invalid UTF-8 becomes U+FFFD
	return s
}

// tailBuffer keeps the last max bytes written to it: the end of stderr is where a
// failing program says why.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.dropped = t.dropped || len(p) > t.max || len(t.buf) > 0
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String is the tail, marked with "…" when earlier output was dropped.
func (t *tailBuffer) String() string {
	s := string(bytes.ToValidUTF8(bytes.TrimSpace(t.buf), []byte("\uFFFD")))
	if t.dropped {
		return "…" + s
	}
	return s
}

// limitBuffer keeps up to max bytes and notes whether more came. It accepts (and drops)
// the excess so that the writer never blocks on a full pipe.
type limitBuffer struct {
	max      int64
	buf      bytes.Buffer
	overflow bool
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	room := l.max - int64(l.buf.Len())
	if int64(len(p)) > room {
		l.overflow = true
		if room > 0 {
			l.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return l.buf.Write(p)
}
