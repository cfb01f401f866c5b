// Package envflag gives the binaries' flags their defaults from TOOLFLEET_* environment
// variables, in one way: an unset or empty variable keeps the built-in default, and a
// malformed one is an error that names the variable, never a silent fallback.
//
//	var env envflag.Env
//	fs.IntVar(&c.Concurrency, "concurrency", env.Int("TOOLFLEET_CONCURRENCY", 4), "...")
//	if err := env.Err(); err != nil { ... }   // every malformed variable, at once
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// String returns the variable's value, or def when it is unset or empty.
func String(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Env reads typed variables and collects what it cannot read.
type Env struct {
	errs []error
}

// Int returns the variable as a whole number, or def when it is unset or empty.
func (e *Env) Int(name string, def int) int {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a whole number", name, v))
		return def
	}
	return n
}

// Duration returns the variable as a duration ("30s"), or def when it is unset or empty.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a duration such as 30s", name, v))
		return def
	}
	return d
}

// Err returns every malformed variable read so far, or nil.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// List splits a comma-separated setting (a flag's or a variable's value) into its
// items, trimmed, without blanks.
func List(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// OperatorRoles registers -operator-roles on fs, read into dst, with
// TOOLFLEET_OPERATOR_ROLES as its default: the roles that may act on other roles' runs
// and calls of their tenant (events.MayAct). The planner and the executors decide with
// them alike, so every part of a fleet that takes them is given the same.
func OperatorRoles(fs *flag.FlagSet, dst *[]string) {
	*dst = List(os.Getenv("TOOLFLEET_OPERATOR_ROLES"))
	fs.Func("operator-roles", "comma-separated `roles` that may follow up, change, pause, cancel and answer the approvals of other roles' runs and calls of their tenant, never beyond what they may call themselves; give every planner and executor of a fleet the same (env TOOLFLEET_OPERATOR_ROLES)",
		func(s string) error { *dst = List(s); return nil })
}
