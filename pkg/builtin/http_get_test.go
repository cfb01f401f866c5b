package builtin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolfleet/toolfleet/pkg/tools"
)

// httpBundle is a loopback server with a few routes, and a getter allowing exactly it.
type httpBundle struct {
	srv   *httptest.Server
	other *httptest.Server // a second loopback server, not in the allowlist
	g     *httpGetter
}

func setupHTTP(t *testing.T, timeout time.Duration, maxBytes int64) httpBundle {
	t.Helper()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("you should not see this"))
	}))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Set-Cookie", "session=secret")
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte("hello from " + r.Method + " " + r.UserAgent()))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte{0xff, 0x00, 0xfe}) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(strings.Repeat("x", 100))) })
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/hello", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/", http.StatusFound)
	})
	mux.HandleFunc("/ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://127.0.0.1/x", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the client gives up
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	allow, err := ParseAllowlist([]string{u.Host}) // 127.0.0.1:<port>: not the other server
	if err != nil {
		t.Fatal(err)
	}
	return httpBundle{srv: srv, other: other, g: newHTTPGetter(allow, timeout, maxBytes)}
}

func TestHTTPGetFetches(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t, 0, 0)
	ctx := context.Background()

	out, err := (&HTTPGet{URL: b.srv.URL + "/hello", g: b.g}).Run(ctx)
	if err != nil {
		t.Fatalf("GET /hello: %v", err)
	}
	got := out.(HTTPResult)
	if got.Status != 200 || got.Body != "hello from GET toolfleet-http_get/1" || got.Encoding != "text" || got.Truncated {
		t.Fatalf("GET /hello = %+v", got)
	}
	if got.Headers["Content-Type"] != "text/plain; charset=utf-8" || got.Headers["ETag"] != `"v1"` {
		t.Fatalf("headers = %v, want Content-Type and ETag", got.Headers)
	}
	if _, ok := got.Headers["Set-Cookie"]; ok {
		t.Fatalf("headers = %v: Set-Cookie must not be passed on", got.Headers)
	}

	out, err = (&HTTPGet{URL: b.srv.URL + "/missing", g: b.g}).Run(ctx)
	if err != nil || out.(HTTPResult).Status != 404 {
		t.Fatalf("GET /missing = %+v, %v; want status 404 as a result", out, err)
	}

	out, err = (&HTTPGet{URL: b.srv.URL + "/hop", g: b.g}).Run(ctx)
	if err != nil || out.(HTTPResult).URL != b.srv.URL+"/hello" || out.(HTTPResult).Status != 200 {
		t.Fatalf("GET /hop = %+v, %v; want the allowed redirect followed to /hello", out, err)
	}

	out, err = (&HTTPGet{URL: b.srv.URL + "/binary", g: b.g}).Run(ctx)
	if err != nil || out.(HTTPResult).Encoding != "base64" || out.(HTTPResult).Body != "/wD+" {
		t.Fatalf("GET /binary = %+v, %v; want base64", out, err)
	}
}

func TestHTTPGetTruncatesAtTheSizeLimit(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t, 0, 10)
	out, err := (&HTTPGet{URL: b.srv.URL + "/big", g: b.g}).Run(context.Background())
	if err != nil {
		t.Fatalf("GET /big: %v", err)
	}
	if got := out.(HTTPResult); got.Body != "xxxxxxxxxx" || !got.Truncated {
		t.Fatalf("GET /big with a 10-byte limit = %+v", got)
	}
}

func TestHTTPGetRefuses(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t, 0, 0)
	localhost := strings.Replace(b.srv.URL, "127.0.0.1", "localhost", 1)
	tests := []struct {
		name     string
		url      string
		code     tools.Code
		fragment string
	}{
		{"host not allowed", b.other.URL + "/", tools.CodeToolFailedPermanent, "not in this executor's allowlist"},
		{"same server under another name", localhost + "/hello", tools.CodeToolFailedPermanent, "not in this executor's allowlist"},
		{"redirect to a host not allowed", b.srv.URL + "/away", tools.CodeToolFailedPermanent, "redirected to " + b.other.URL},
		{"redirect to another scheme", b.srv.URL + "/ftp", tools.CodeToolFailedPermanent, "redirected to ftp://"},
		{"redirect loop", b.srv.URL + "/loop", tools.CodeToolFailedPermanent, "more than 5 redirects"},
		{"file scheme", "file:///etc/passwd", tools.CodeInvalidInput, "only http and https"},
		{"no scheme", "example.com/x", tools.CodeInvalidInput, "only http and https"},
		{"no host", "http:///x", tools.CodeInvalidInput, "has no host"},
		{"credentials", "http://user:pw@" + strings.TrimPrefix(b.srv.URL, "http://") + "/hello", tools.CodeInvalidInput, "credentials"},
		{"not a URL", "http://[::1", tools.CodeInvalidInput, "is not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := (&HTTPGet{URL: tt.url, g: b.g}).Run(context.Background())
			if err == nil {
				t.Fatalf("GET %s = %+v, want a refusal", tt.url, out)
			}
			wantCode(t, err, tt.code, tt.fragment)
		})
	}
}

func TestHTTPGetFailsClosedWithoutAnAllowlist(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t, 0, 0)
	_, err := (&HTTPGet{URL: b.srv.URL + "/hello", g: newHTTPGetter(Allowlist{}, 0, 0)}).Run(context.Background())
	wantCode(t, err, tools.CodeToolFailedPermanent, "allowlist is empty")
	_, err = (&HTTPGet{URL: b.srv.URL + "/hello"}).Run(context.Background())
	wantCode(t, err, tools.CodeToolFailedPermanent, "not configured")
}

func TestHTTPGetTimesOut(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t, 50*time.Millisecond, 0)
	_, err := (&HTTPGet{URL: b.srv.URL + "/slow", g: b.g}).Run(context.Background())
	wantCode(t, err, tools.CodeTimeout, "did not answer in time")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = (&HTTPGet{URL: b.srv.URL + "/slow", g: b.g}).Run(ctx)
	if !errors.Is(err, tools.ErrCanceled) {
		t.Fatalf("GET with a canceled context: %v, want canceled", err)
	}
}

func TestHTTPGetNetworkFailureIsRetryable(t *testing.T) {
	t.Parallel()
	b := setupHTTP(t, 0, 0)
	b.srv.Close() // the port is allowed but nothing listens any more
	_, err := (&HTTPGet{URL: b.srv.URL + "/hello", g: b.g}).Run(context.Background())
	wantCode(t, err, tools.CodeToolFailed, "http_get")
	if !tools.AsError(err, tools.CodeInternal).Code.Retryable() {
		t.Fatal("a refused connection should be retryable")
	}
}
