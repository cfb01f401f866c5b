package pickercli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
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
		!strings.Contains(got, "settings chosen         w1 co0.1 p2  (defaults: 1 usage runs are too few to choose on)") ||
		!strings.Contains(got, "usage, fixed defaults") || !strings.Contains(got, "picker cold") || strings.Contains(got, "sealtools") {
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

// -usage-cv lets the learned scorer choose its own settings on each fold's usage, as
// the service would, and prints them with the held-out score they were chosen on, beside
// the fixed defaults on the same fold, the cold picker and plain BM25.
func TestEvalUsageCVShowsTheChosenSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-validates the retrieval benchmarks: minutes of single-threaded scoring, skipped in -short")
	}
	data := shareddata.Require(t, "toolret")
	var out bytes.Buffer
	if err := Eval(t.Context(), []string{"-data", data, "-usage-cv", "-folds", "3"}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "the settings the picker chose itself on each fold's usage") || !strings.Contains(got, "fixed nDCG/R") {
		t.Fatalf("eval -usage-cv printed:\n%s", got)
	}
	setting := regexp.MustCompile(`^w[0-9.]+ co[0-9.]+ p[12]$`)
	folds := 0
	for line := range strings.Lines(got) {
		f := strings.Fields(line)
		if len(f) < 8 || (f[0] != "toollens" && f[0] != "sealtools") || f[1] == "mean" {
			continue
		}
		folds++
		chosen, tuning := strings.Join(f[4:7], " "), f[7]
		if !setting.MatchString(chosen) || !strings.Contains(tuning, "/") {
			t.Errorf("fold row %q: chosen %q, tuning score %q", strings.TrimSpace(line), chosen, tuning)
		}
		if f[0] == "toollens" && chosen == "w1 co0.1 p2" {
			t.Errorf("fold row %q: ToolLens kept the defaults", strings.TrimSpace(line))
		}
	}
	if folds != 6 {
		t.Fatalf("want 3 folds of each benchmark, got %d rows:\n%s", folds, got)
	}
}
