package pickercli

import (
	"io"
	"strings"
	"testing"
)

func TestEvalRejectsBadArguments(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"one fold", []string{"-data", t.TempDir(), "-folds", "1"}, "-folds must be 0 or at least 2"},
		{"negative folds", []string{"-data", t.TempDir(), "-folds", "-3"}, "-folds must be 0 or at least 2"},
		{"usage-cv with one fold", []string{"-data", t.TempDir(), "-usage-cv", "-folds", "1"}, "-usage-cv needs -folds of at least 2"},
		{"stray argument", []string{"-data", t.TempDir(), "toollens"}, "unexpected arguments"},
		{"missing data", []string{"-data", t.TempDir() + "/nope", "-folds", "2"}, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Eval(t.Context(), c.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Eval(%q) = %v, want an error containing %q", c.args, err, c.want)
			}
		})
	}
}
