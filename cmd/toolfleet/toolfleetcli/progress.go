package toolfleetcli

import (
	"fmt"
	"io"
	"strings"
)

// progress draws a bar in place on a terminal, or a line every 10% elsewhere (CI logs,
// where \r would pile up into one long line).
type progress struct {
	w        io.Writer
	tty      bool
	total    int
	lastTens int
}

func newProgress(w io.Writer, tty bool, total int) *progress {
	return &progress{w: w, tty: tty, total: total, lastTens: -1}
}

func (p *progress) show(n int) {
	if p.w == nil || p.total <= 0 {
		return
	}
	if p.tty {
		const width = 40
		filled := width * n / p.total
		fmt.Fprintf(p.w, "\r  [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, p.total)
		return
	}
	if tens := 10 * n / p.total; tens > p.lastTens {
		p.lastTens = tens
		fmt.Fprintf(p.w, "  %3d%% (%d/%d)\n", tens*10, n, p.total)
	}
}

func (p *progress) done() {
	if p.w != nil && p.tty {
		fmt.Fprintln(p.w)
	}
}
