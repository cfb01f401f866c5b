package budget

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(yml, []byte("models:\n  main: {inputPerMTok: 2.5, outputPerMTok: 10}\ntools:\n  web_search: 0.01\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPrices(yml)
	if err != nil || p.Models["main"].OutputPerMTok != 10 || p.Tools["web_search"] != 0.01 {
		t.Fatalf("%+v, %v", p, err)
	}
	js := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(js, []byte(`{"models":{"main":{"inputPerMTok":1,"outputPerMTok":2}},"tools":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := LoadPrices(js); err != nil || p.Models["main"].InputPerMTok != 1 {
		t.Fatalf("%+v, %v", p, err)
	}
	for _, bad := range []string{"models:\n  main: {inputPerMTok: -1}\n", "modles: {}\n", "tools: {x: .nan}\n"} {
		if err := os.WriteFile(yml, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPrices(yml); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
