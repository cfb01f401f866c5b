package toolsfile

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// ProgressPrefix starts a stderr line by which a command reports its progress: the rest
// of the line is a JSON object {"message","fraction","data"} (see [tools.Progress]),
// e.g.
//
//	::progress {"message":"fetched 3 of 10 pages","fraction":0.3}
//
// Such a line is passed to [tools.ReportProgress] and left out of the stderr the call's
// error shows; a line that does not parse as one is kept as ordinary stderr.
const ProgressPrefix = "::progress "

// maxStderrLine bounds a line held back while its end has not arrived; a longer one is
// ordinary stderr.
const maxStderrLine = 64 << 10

// progressWriter splits a command's stderr into lines: progress lines are reported, the
// others go to out unchanged.
type progressWriter struct {
	ctx  context.Context
	out  io.Writer
	line []byte
}

func (w *progressWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			if len(w.line) > maxStderrLine {
				_, _ = w.out.Write(w.line) // out is the stderr tail: its Write cannot fail
				w.line = w.line[:0]
			}
			break
		}
		w.line = append(w.line, p[:i+1]...)
		p = p[i+1:]
		w.emit()
	}
	return n, nil
}

// flush passes on what is left of an unfinished line.
func (w *progressWriter) flush() {
	if len(w.line) > 0 {
		w.emit()
	}
}

func (w *progressWriter) emit() {
	line := w.line
	w.line = w.line[:0]
	if rest, ok := bytes.CutPrefix(line, []byte(ProgressPrefix)); ok {
		var p tools.Progress
		if body := bytes.TrimSpace(rest); len(body) > 0 && body[0] == '{' && json.Unmarshal(body, &p) == nil {
			tools.ReportProgress(w.ctx, p)
			return
		}
	}
	_, _ = w.out.Write(line) // out is the stderr tail: its Write cannot fail
}
