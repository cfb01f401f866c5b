package inspector

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The inspector serves its page for its address and any view under it, its own files
// as they are, nothing else, with a policy that allows no other origin; the API it is
// mounted beside keeps every other path.
func TestMount(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "api "+r.URL.Path) })
	srv := httptest.NewServer(Mount(api))
	defer srv.Close()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	for _, path := range []string{"/ui", "/ui/", "/ui/runs/r1", "/ui/index.html"} {
		res, body := get(path)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `<script src="app.js"></script>`) {
			t.Errorf("GET %s: %d, not the page:\n%.200s", path, res.StatusCode, body)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	for path, want := range map[string]string{"/ui/app.js": "text/javascript", "/ui/app.css": "text/css"} {
		if res, body := get(path); res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), want) || len(body) < 1000 {
			t.Errorf("GET %s: %d %s, %d bytes", path, res.StatusCode, res.Header.Get("Content-Type"), len(body))
		}
	}
	if _, body := get("/v1/runs"); body != "api /v1/runs" {
		t.Errorf("the API did not get /v1/runs: %q", body)
	}
	res, err := http.Post(srv.URL+"/ui/", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405", res.StatusCode)
	}
}
