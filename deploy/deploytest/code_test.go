package deploytest

import (
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// binaryCode is what one binary of the repository can read: the string literals of the
// non-test Go files of every package of this module it imports. An environment variable
// or an HTTP path the deployment relies on must be one of them.
type binaryCode struct {
	literals map[string]bool
}

var (
	codeMu    sync.Mutex
	codeCache = map[string]*binaryCode{}
)

// codeOf returns the code of cmd/<bin>, or skips the calling test when that command is
// not in this tree yet (the check becomes strict as soon as it is).
func codeOf(t *testing.T, bin string) *binaryCode {
	t.Helper()
	codeMu.Lock()
	defer codeMu.Unlock()
	if c, ok := codeCache[bin]; ok {
		return c
	}
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "cmd", bin)); err != nil {
		t.Skipf("cmd/%s is not in this tree: its flags and environment cannot be checked yet", bin)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/"+bin)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./cmd/%s: %v", bin, err)
	}
	c := &binaryCode{literals: map[string]bool{}}
	for _, dir := range strings.Fields(string(out)) {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			addLiterals(t, c.literals, f)
		}
	}
	codeCache[bin] = c
	return c
}

func addLiterals(t *testing.T, into map[string]bool, file string) {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(file, -1, len(src)), src, nil, 0)
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return
		}
		if tok == token.STRING {
			if v, err := strconv.Unquote(lit); err == nil {
				into[v] = true
			}
		}
	}
}

// readsEnv reports whether the binary names the environment variable.
func (c *binaryCode) readsEnv(name string) bool { return c.literals[name] }

// servesPath reports whether the binary names the HTTP path, alone or in a mux pattern
// such as "GET /healthz".
func (c *binaryCode) servesPath(path string) bool {
	path, _, _ = strings.Cut(path, "?")
	for lit := range c.literals {
		if lit == path || strings.HasSuffix(lit, " "+path) {
			return true
		}
	}
	return false
}
