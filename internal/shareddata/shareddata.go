// Package shareddata finds the third-party test data that lives beside the repository in
// ../shared/testdata (read at run time, never copied into the repository).
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the directory ../shared/testdata/<name> next to the repository root, or ""
// when it is absent. TOOLFLEET_SHARED overrides the location of shared/.
func Dir(name string) string {
	shared := os.Getenv("TOOLFLEET_SHARED")
	if shared == "" {
		root := repoRoot()
		if root == "" {
			return ""
		}
		shared = filepath.Join(root, "..", "shared")
	}
	dir := filepath.Join(shared, "testdata", name)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

// Require returns Dir(name) or skips the test with a message saying the data is absent.
func Require(tb testing.TB, name string) string {
	tb.Helper()
	dir := Dir(name)
	if dir == "" {
		tb.Skipf("shared test data %q not found (expected ../shared/testdata/%s beside the repository, or set TOOLFLEET_SHARED)", name, name)
	}
	return dir
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
