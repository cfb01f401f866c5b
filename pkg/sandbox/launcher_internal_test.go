//go:build linux

package sandbox

import (
	"strings"
	"testing"
)

// A launcher refuses a spec of another protocol, or with a field it does not know,
// before it applies anything: it cannot tell what the program may do.
func TestLaunchRefusesASpecItDoesNotKnow(t *testing.T) {
	for spec, want := range map[string]string{
		`{"protocol":"0","policy":{}}`:                    `the launch protocol is "0", this launcher speaks "1"`,
		`{"protocol":"1","policy":{},"mounts":["/"]}`:     `unknown field "mounts"`,
		`{"protocol":"1","policy":{"readOnlyRoot":true}}`: `unknown field "readOnlyRoot"`,
		`{"policy":{}}`: `the launch protocol is ""`,
	} {
		if err := launch(spec, "/bin/true", []string{"/bin/true"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("launch with %s: %v, want an error saying %q", spec, err, want)
		}
	}
}
