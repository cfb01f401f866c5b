package ops

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release a build without VCS information says it is, set by the linker:
// the Dockerfile's build has no .git to stamp from, so it passes
// -ldflags "-X github.com/toolfleet/toolfleet/internal/ops.version=$VERSION".
var version string

// BuildInfo is what a program says about its build (`<program> version`), from
// runtime/debug.ReadBuildInfo: the module version (the tag when built with go install
// module@version, or with go build from a checkout of a tagged commit; a pseudo-version
// after it, +dirty when the tree was modified; "(devel)" with go run or without VCS
// stamping), the VCS revision and time (when built from a git checkout with VCS stamping
// on), and the Go version. A version set at link time (-X ...ops.version=v0.1.0) wins.
type BuildInfo struct {
	Program   string `json:"program"`
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Build returns the running program's build information.
func Build(program string) BuildInfo {
	b := BuildInfo{Program: program, Version: "(unknown)", GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; v != "" {
			b.Version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if version != "" {
		b.Version = version
	}
	return b
}

// String is the one line `<program> version` prints, e.g.
// "toolfleet v0.3.0 (revision 1a2b3c4d5e6f, 2026-05-01T10:00:00Z) go1.26.0 linux/amd64".
func (b BuildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s %s", b.Program, b.Version)
	switch {
	case b.Revision != "":
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if b.Modified {
			rev += ", modified"
		}
		if b.Time != "" {
			rev += ", " + b.Time
		}
		fmt.Fprintf(&s, " (revision %s)", rev)
	default:
		s.WriteString(" (no VCS revision: built with -buildvcs=false or outside a checkout)")
	}
	fmt.Fprintf(&s, " %s %s", b.GoVersion, b.Platform)
	return s.String()
}
