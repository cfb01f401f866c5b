package toolfleetcli

import (
	"flag"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// longFlags returns the command line with each long flag given with one dash (-model x,
// -model=x) written with two, as cobra reads it; pflag would read -model as the
// shorthands -m -o -d -e -l. toolfleet's programs took Go's flag package style, the other
// programs (executor, planner, picker) still do, and the docs and scripts spell flags so:
// the move to cobra keeps them working, as other Go CLIs that made it did.
//
// A word is rewritten only where it is a flag of the command the line runs (its own and
// those it inherits): shorthands stay (-o json, -ojson, -q), and so do a flag's value
// (--system -x), everything after "--", and the word a shell completion request
// completes. A single-dash word that is no flag at all and starts with no shorthand is
// written with two dashes too, so that cobra's error names it: "unknown flag: --bogus".
func longFlags(root *cobra.Command, args []string) []string {
	out := slices.Clone(args)
	last := len(args)
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		last-- // the word being completed stays as typed
	}
	cmd := root
	for i := 0; i < last; i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if sub := subcommand(cmd, a); sub != nil {
				cmd = sub
			}
			continue
		}
		cmd.InitDefaultHelpFlag() // -help is a flag too; cobra adds it only when it runs
		fs := cmd.Flags()         // after InitDefaultHelpFlag: the inherited flags too
		body := a[1:]
		if body[0] != '-' && !isLong(fs, body) {
			if needsValue(fs, body) {
				i++
			}
			continue
		}
		if body[0] != '-' {
			out[i] = "-" + a
		}
		name, _, withValue := strings.Cut(strings.TrimPrefix(body, "-"), "=")
		if f := fs.Lookup(name); f != nil && f.NoOptDefVal == "" && !withValue {
			i++ // the flag's value, whatever it looks like
		}
	}
	return out
}

// isLong reports whether a word after its one dash is a long flag of fs, or no flag at
// all that does not start with a shorthand either.
func isLong(fs *pflag.FlagSet, body string) bool {
	name, _, _ := strings.Cut(body, "=")
	if len(name) < 2 {
		return false
	}
	return fs.Lookup(name) != nil || fs.ShorthandLookup(name[:1]) == nil
}

// needsValue reports whether shorthands (after their dash: "o", "qo", "ojson") end in
// one that takes the next word as its value, as pflag reads them.
func needsValue(fs *pflag.FlagSet, shorthands string) bool {
	for i := range len(shorthands) {
		f := fs.ShorthandLookup(shorthands[i : i+1])
		if f == nil {
			return false // pflag's error
		}
		if f.NoOptDefVal == "" {
			return i == len(shorthands)-1 // else the rest is the value: -ojson, -o=json
		}
	}
	return false
}

// subcommand returns cmd's subcommand called name, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, sub := range cmd.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// addGoFlags adds the Go flags of fs to cmd, as pflag's AddGoFlagSet does, but with each
// value named in help as the flag package names it (`roles` in the usage names
// -operator-roles's), and the usage without those quotes in completions.
func addGoFlags(cmd *cobra.Command, fs *flag.FlagSet) {
	fs.VisitAll(func(gf *flag.Flag) {
		pf := pflag.PFlagFromGoFlag(gf)
		name, usage := flag.UnquoteUsage(gf)
		if pf.NoOptDefVal == "" { // a bool's value has no name
			pf.Value = namedValue{gf.Value, name}
		}
		pf.Usage = usage
		cmd.Flags().AddFlag(pf)
	})
}

// namedValue is a Go flag's value as a pflag one, its type the name help shows.
type namedValue struct {
	flag.Value
	name string
}

func (v namedValue) Type() string { return v.name }
