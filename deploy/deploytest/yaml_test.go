package deploytest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// obj is one decoded YAML document.
type obj = map[string]any

// decodeAll decodes every document of a multi-document YAML stream.
func decodeAll(t *testing.T, name string, data []byte) []obj {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []obj
	for {
		var d obj
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// render builds a kustomization with kubectl (kustomize is built into kubectl), the way
// kubectl apply -k does. Without kubectl the rendered checks are skipped; the source
// checks still run.
func render(t *testing.T, dir string) []obj {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH: cannot render the kustomizations")
	}
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return decodeAll(t, dir, out)
}

// get walks a path of map keys and returns what is there, or nil.
func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func name(o obj) string { return str(o, "metadata", "name") }

// find returns the rendered object of kind and name, or nil.
func find(docs []obj, kind, n string) obj {
	for _, d := range docs {
		if str(d, "kind") == kind && name(d) == n {
			return d
		}
	}
	return nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlFiles lists every .yaml and .yml file under dir.
func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
