package builtin

import (
	"net/url"
	"strings"
	"testing"
)

func TestAllowlistMatches(t *testing.T) {
	t.Parallel()
	a, err := ParseAllowlist([]string{"Example.com", "*.wiki.org", "api.test:8443", "10.0.0.7", "[::1]:8080", ""})
	if err != nil {
		t.Fatalf("ParseAllowlist: %v", err)
	}
	tests := []struct {
		url  string
		want bool
	}{
		{"https://example.com/x", true},
		{"http://EXAMPLE.com:9000/", true},
		{"https://example.com./", true},
		{"https://www.example.com/", false},
		{"https://example.com.evil.net/", false},
		{"https://en.wiki.org/", true},
		{"https://a.b.wiki.org/", true},
		{"https://wiki.org/", false},
		{"https://evilwiki.org/", false},
		{"https://api.test:8443/", true},
		{"https://api.test/", false},
		{"http://10.0.0.7/", true},
		{"http://10.0.0.8/", false},
		{"http://[::1]:8080/", true},
		{"http://[::1]:8081/", false},
		{"ftp://example.com/", false},
		{"file:///etc/passwd", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Allows(u); got != tt.want {
			t.Errorf("Allows(%s) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestAllowlistEmptyAllowsNothingAndStarEverything(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("https://example.com/")
	empty, err := ParseAllowlist(nil)
	if err != nil || !empty.Empty() || empty.Allows(u) {
		t.Fatalf("empty allowlist: err %v, allows %v", err, empty.Allows(u))
	}
	all, err := ParseAllowlist([]string{"*"})
	if err != nil || !all.Allows(u) {
		t.Fatalf(`"*": err %v, allows %v`, err, all.Allows(u))
	}
	ftp, _ := url.Parse("ftp://example.com/")
	if all.Allows(ftp) {
		t.Fatal(`"*" allows an ftp URL`)
	}
}

func TestAllowlistRefusesMalformedPatterns(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"https://example.com", "example.com/path", "user@example.com", "*example.com",
		"ex*ample.com", "example.com:0", "example.com:http", "*.10.0.0.1", "exa mple.com", "a..b", ":80"} {
		_, err := ParseAllowlist([]string{"ok.com", p})
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ParseAllowlist(%q) error = %v, want one naming the pattern", p, err)
		}
	}
}
