package pick

import (
	"slices"
	"strings"
)

// filter decides which tools may be candidates: safety first, then tags, role and
// capabilities. It is checked only for tools that would make the top k, so filters cost
// nothing for the many tools that score too low.
type filter struct {
	s            *Snapshot
	only         map[string]bool // nil: any tool
	allowUnsafe  bool
	include      []string
	exclude      []string
	role         string
	capabilities []string
	plain        bool // no filter but safety and roles: open tools pass unread
}

func newFilter(s *Snapshot, o Options) *filter {
	f := &filter{s: s, allowUnsafe: o.AllowUnsafe, include: o.IncludeTags, exclude: o.ExcludeTags,
		role: o.Role, capabilities: o.Capabilities}
	f.plain = len(o.Tools) == 0 && len(o.IncludeTags) == 0 && len(o.ExcludeTags) == 0 && len(o.Capabilities) == 0
	if len(o.Tools) > 0 {
		f.only = make(map[string]bool, len(o.Tools))
		for _, n := range o.Tools {
			f.only[n] = true
		}
	}
	return f
}

func (f *filter) allow(id DocID) bool {
	if !f.s.isLive(id) {
		return false
	}
	if f.plain && f.s.open[id>>6]&(1<<(id&63)) != 0 {
		return true
	}
	d := &f.s.docs[id].def
	if !d.Safe && !f.allowUnsafe {
		return false
	}
	if f.only != nil && !f.only[d.Name] {
		return false
	}
	if len(f.include) > 0 && !anyFold(d.Tags, f.include) {
		return false
	}
	if len(f.exclude) > 0 && anyFold(d.Tags, f.exclude) {
		return false
	}
	if len(d.Roles) > 0 && !slices.Contains(d.Roles, f.role) {
		return false
	}
	for _, c := range f.capabilities {
		if !containsFold(d.Capabilities, c) {
			return false
		}
	}
	return true
}

// anyFold reports whether have and want share an element, ignoring case.
func anyFold(have, want []string) bool {
	for _, w := range want {
		if containsFold(have, w) {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
