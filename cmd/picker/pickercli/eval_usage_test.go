package pickercli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolfleet/toolfleet/internal/shareddata"
)

// -usage learns from DIR's lines, never from a line whose text is a scored query, and
// reports the learned scorer beside the cold one; a line without tools is refused.
func TestEvalUsage(t *testing.T) {
	data := shareddata.Require(t, "toolret")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "toollens"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(lines string) {
		if err := os.WriteFile(filepath.Join(dir, "toollens", "queries.jsonl"), []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The first line is a query of the benchmark itself, the second a new request.
	write(`{"id": "u1", "query": "I'm creating party appetizers using the ingredient shrimp.", "relevant": ["0", "1", "2"]}
{"id": "u2", "query": "I'm making party snacks with prawns", "relevant": ["0", "1", "2"]}
`)
	var out bytes.Buffer
	if err := Eval(t.Context(), []string{"-data", data, "-usage", dir}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "learned from 1 usage lines, 1 skipped as scored queries") ||
		!strings.Contains(got, "picker cold") || strings.Contains(got, "sealtools") {
		t.Fatalf("eval -usage printed:\n%s", got)
	}
	write(`{"id": "u3", "query": "no tools", "relevant": []}` + "\n")
	if err := Eval(t.Context(), []string{"-data", data, "-usage", dir}, &out); err == nil || !strings.Contains(err.Error(), "needs a query and the tools") {
		t.Fatalf("a line without tools: %v", err)
	}
	if err := Eval(t.Context(), []string{"-data", data, "-usage", t.TempDir()}, &out); err == nil || !strings.Contains(err.Error(), "no benchmark") {
		t.Fatalf("a directory without usage: %v", err)
	}
}

// -usage-cv chooses the learned scorer's weights for each held-out fold on its training
// folds alone and prints them, beside the fixed defaults on the same fold, the cold
// picker and plain BM25.
func TestEvalUsageCVChoosesWeightsPerFold(t *testing.T) {
	data := shareddata.Require(t, "toolret")
	var out bytes.Buffer
	if err := Eval(t.Context(), []string{"-data", data, "-usage-cv", "-folds", "3"}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "weights chosen per fold among 16 by a 2-fold cross-validation of its training folds alone") ||
		!strings.Contains(got, "fixed nDCG/R") {
		t.Fatalf("eval -usage-cv printed:\n%s", got)
	}
	folds := 0
	for line := range strings.Lines(got) {
		f := strings.Fields(line)
		if len(f) < 5 || (f[0] != "toollens" && f[0] != "sealtools") || f[1] == "mean" {
			continue
		}
		folds++
		w, co, ok := strings.Cut(f[4], "/")
		if !ok || !slices.Contains([]string{"0.5", "1", "2", "4"}, w) || !slices.Contains([]string{"-1", "0.1", "0.3", "0.6"}, co) {
			t.Errorf("fold row %q: chosen weights %q are not of the grid", strings.TrimSpace(line), f[4])
		}
	}
	if folds != 6 {
		t.Fatalf("want 3 folds of each benchmark, got %d rows:\n%s", folds, got)
	}
}
