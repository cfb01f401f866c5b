package docstest

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Snippet is one ```sh block of a markdown file.
type Snippet struct {
	File string // the file's path, as given to Extract
	Line int    // the line of its opening fence, from 1
	Text string // the block's lines, without the fences
	Run  bool   // marked <!-- docstest: run -->
	// Expect are the texts the output of a run block must hold: <!-- docstest: run;
	// expect "text" "more" --> (Go-quoted strings).
	Expect []string
	// Skip is the reason of a <!-- docstest: skip (reason) --> mark.
	Skip string
}

// Name is file:line, how a test names the snippet.
func (s Snippet) Name() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

var (
	markRE   = regexp.MustCompile(`^<!-- docstest: (run(?:; expect (.+))?|skip \((.+)\)) -->$`)
	quotedRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// Extract returns the ```sh blocks of a markdown file's text, each with its mark. A block
// without a mark, a skip without a reason, or an unclosed fence is an error naming the
// line; Extract goes on past it and returns every error found.
func Extract(file, text string) ([]Snippet, []error) {
	var (
		out    []Snippet
		errs   []error
		prev   string
		inside *Snippet // the block being read; nil outside any block
		fence  bool     // inside a fence of another language
		body   []string
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case inside != nil && strings.TrimSpace(line) == "```":
			inside.Text = strings.Join(body, "\n") + "\n"
			out = append(out, *inside)
			inside, body = nil, nil
		case inside != nil:
			body = append(body, line)
		case fence:
			fence = strings.TrimSpace(line) != "```" // a closing fence has no info string
		case strings.TrimSpace(line) == "```sh":
			s := Snippet{File: file, Line: n}
			m := markRE.FindStringSubmatch(strings.TrimSpace(prev))
			switch {
			case m == nil:
				errs = append(errs, fmt.Errorf("%s:%d: a ```sh block without a mark: put <!-- docstest: run --> or <!-- docstest: skip (reason) --> on the line before it", file, n))
			case strings.HasPrefix(m[1], "run"):
				s.Run = true
				for _, q := range quotedRE.FindAllString(m[2], -1) {
					text, err := strconv.Unquote(q)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s:%d: expect %s: %v", file, n, q, err))
						continue
					}
					s.Expect = append(s.Expect, text)
				}
			default:
				s.Skip = strings.TrimSpace(m[3])
			}
			inside = &s
		case strings.HasPrefix(line, "```"):
			fence = true
		}
		prev = line
	}
	if inside != nil {
		errs = append(errs, fmt.Errorf("%s:%d: the ```sh block is never closed", file, inside.Line))
	}
	return out, errs
}

// pickRE matches a documented pick request: nats req toolfleet.picker.pick '<json>',
// possibly wrapped over two lines of prose.
var pickRE = regexp.MustCompile(`nats\s+req\s+toolfleet\.picker\.pick\s+'([^']*)'`)

// PickRequests returns the bodies of the pick requests a text shows with the nats CLI.
func PickRequests(text string) []string {
	var out []string
	for _, m := range pickRE.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// CurlPosts returns the curl commands of a text that send a body (-d, --data), each on
// one line: a command continued with a backslash is joined, and a comment's leading #
// is dropped, so that an example in a YAML file's comment counts too.
func CurlPosts(text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(strings.TrimSpace(lines[i]), "# ")
		if !strings.Contains(line, "curl ") {
			continue
		}
		cmd := line
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimLeft(strings.TrimSpace(lines[i]), "# ")
		}
		if strings.Contains(cmd, " -d ") || strings.Contains(cmd, " -d'") || strings.Contains(cmd, " --data") {
			out = append(out, cmd)
		}
	}
	return out
}
