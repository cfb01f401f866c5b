package builtin

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Allowlist says which hosts http_get may reach. A pattern is one of
//
//	example.com          that host, on any port
//	example.com:8443     that host on that port only
//	*.example.com        any subdomain of example.com (not example.com itself)
//	10.0.0.7, [::1]:80   IP addresses, the same way
//	*                    every host (for development; say it explicitly)
//
// Matching ignores case and a trailing dot. The empty Allowlist allows nothing: http_get
// fails closed. The allowlist checks names as written in the URL; it does not resolve
// them, so allow only names whose DNS you trust.
type Allowlist struct {
	patterns []hostPattern
}

type hostPattern struct {
	any    bool   // "*"
	host   string // exact host, or the suffix ".example.com" when wildcard
	suffix bool   // "*.example.com"
	port   string // "" for any port
}

// ParseAllowlist parses host patterns; a malformed one is an error naming it. Empty
// strings are skipped, so a comma-separated setting with a trailing comma works.
func ParseAllowlist(patterns []string) (Allowlist, error) {
	var a Allowlist
	var errs []error
	for _, raw := range patterns {
		s := strings.ToLower(strings.TrimSpace(raw))
		if s == "" {
			continue
		}
		p, err := parseHostPattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("allowlist pattern %q: %w", raw, err))
			continue
		}
		a.patterns = append(a.patterns, p)
	}
	if len(errs) > 0 {
		return Allowlist{}, errors.Join(errs...)
	}
	return a, nil
}

func parseHostPattern(s string) (hostPattern, error) {
	if s == "*" {
		return hostPattern{any: true}, nil
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@") {
		return hostPattern{}, errors.New("write a host (and optional port), not a URL")
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return hostPattern{}, fmt.Errorf("port %q is not a number from 1 to 65535", p)
		}
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	host = strings.TrimSuffix(host, ".")
	p := hostPattern{host: host, port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		p.host, p.suffix = "."+rest, true
		host = rest
	}
	if host == "" {
		return hostPattern{}, errors.New("no host")
	}
	if net.ParseIP(host) != nil {
		if p.suffix {
			return hostPattern{}, errors.New("a wildcard cannot precede an IP address")
		}
		return p, nil
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return hostPattern{}, errors.New(`a host is letters, digits, "-" and "." (a wildcard only as a leading "*.")`)
		}
	}
	return p, nil
}

// Empty reports whether the allowlist allows nothing.
func (a Allowlist) Empty() bool { return len(a.patterns) == 0 }

// Allows reports whether u's host and port match a pattern. Only http and https URLs
// can match.
func (a Allowlist) Allows(u *url.URL) bool {
	var defaultPort string
	switch u.Scheme {
	case "http":
		defaultPort = "80"
	case "https":
		defaultPort = "443"
	default:
		return false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	for _, p := range a.patterns {
		if p.any {
			return true
		}
		if p.port != "" && p.port != port {
			continue
		}
		if p.suffix && strings.HasSuffix(host, p.host) || !p.suffix && host == p.host {
			return true
		}
	}
	return false
}
