package envflag

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	t.Setenv("TOOLFLEET_T_STR", "x")
	t.Setenv("TOOLFLEET_T_INT", " 7 ")
	t.Setenv("TOOLFLEET_T_DUR", "1500ms")
	t.Setenv("TOOLFLEET_T_EMPTY", "")
	var env Env
	if got := String("TOOLFLEET_T_STR", "d"); got != "x" {
		t.Errorf("String = %q", got)
	}
	if got := String("TOOLFLEET_T_EMPTY", "d"); got != "d" {
		t.Errorf("String of an empty variable = %q, want the default", got)
	}
	if got := env.Int("TOOLFLEET_T_INT", 1); got != 7 {
		t.Errorf("Int = %d", got)
	}
	if got := env.Duration("TOOLFLEET_T_DUR", time.Second); got != 1500*time.Millisecond {
		t.Errorf("Duration = %s", got)
	}
	if got := env.Int("TOOLFLEET_T_UNSET", 3); got != 3 {
		t.Errorf("Int of an unset variable = %d, want the default", got)
	}
	if err := env.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}

	t.Setenv("TOOLFLEET_T_INT", "three")
	t.Setenv("TOOLFLEET_T_DUR", "soon")
	var bad Env
	if got := bad.Int("TOOLFLEET_T_INT", 1); got != 1 {
		t.Errorf("malformed Int = %d, want the default", got)
	}
	bad.Duration("TOOLFLEET_T_DUR", time.Second)
	err := bad.Err()
	if err == nil || !strings.Contains(err.Error(), `TOOLFLEET_T_INT="three"`) || !strings.Contains(err.Error(), `TOOLFLEET_T_DUR="soon"`) {
		t.Fatalf("Err = %v, want both malformed variables named", err)
	}
}

// -operator-roles: the variable is the default, the flag wins, blanks are dropped.
func TestOperatorRoles(t *testing.T) {
	t.Setenv("TOOLFLEET_OPERATOR_ROLES", " ops, ,oncall ")
	var roles []string
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	OperatorRoles(fs, &roles)
	if !slices.Equal(roles, []string{"ops", "oncall"}) {
		t.Errorf("from the environment: %q", roles)
	}
	if err := fs.Parse([]string{"-operator-roles", "admin"}); err != nil || !slices.Equal(roles, []string{"admin"}) {
		t.Errorf("from the flag: %q, %v", roles, err)
	}
	if got := List(" , "); got != nil {
		t.Errorf("List of blanks = %q", got)
	}
}
