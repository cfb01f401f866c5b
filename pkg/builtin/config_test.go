package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		cfg      Config
		fragment string // "" for a valid config
	}{
		{"zero", Config{}, ""},
		{"everything", Config{SandboxRoot: dir, HTTPAllowlist: []string{"example.com"}, Enable: []string{"calculator", "read_file", "http_get"}}, ""},
		{"missing sandbox", Config{SandboxRoot: filepath.Join(dir, "nope")}, "sandbox root"},
		{"sandbox is a file", Config{SandboxRoot: file}, "is not a directory"},
		{"bad pattern", Config{HTTPAllowlist: []string{"http://example.com"}}, `allowlist pattern "http://example.com"`},
		{"negative limit", Config{MaxReadBytes: -1}, "cannot be negative"},
		{"negative duration", Config{MaxSleep: -1}, "cannot be negative"},
		{"unknown tool", Config{Enable: []string{"rm_rf"}}, `unknown built-in tool "rm_rf"`},
		{"file tool without a sandbox", Config{Enable: []string{"write_file"}}, "write_file is enabled but no sandbox root"},
		{"http_get without an allowlist", Config{Enable: []string{"http_get"}}, "http allowlist is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			if tt.fragment == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.fragment) {
				t.Fatalf("Validate error = %v, want ErrInvalidConfig mentioning %q", err, tt.fragment)
			}
		})
	}
}
