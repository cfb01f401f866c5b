package inspector

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// Path is where the inspector is served.
const Path = "/ui/"

//go:embed static
var static embed.FS

// contentSecurityPolicy allows only the inspector's own files and requests to its own
// origin: no inline script, no other host, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the inspector's files under [Path]: index.html for the page's own
// address and any path that is not one of its files (its views are the URL's fragment).
func Handler() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	fileServer := http.StripPrefix(Path, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the inspector serves only GET and HEAD", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary brings new files
		name := strings.TrimPrefix(r.URL.Path, Path)
		if name == "" || !exists(files, name) {
			r = r.Clone(r.Context())
			r.URL.Path = Path // index.html
		}
		fileServer.ServeHTTP(w, r)
	})
}

func exists(files fs.FS, name string) bool {
	st, err := fs.Stat(files, name)
	return err == nil && !st.IsDir()
}

// Mount serves the inspector at [Path] (and redirects /ui to it) and api everywhere
// else: how the planner program and `toolfleet dev` put it beside the API.
func Mount(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler())
	mux.Handle(strings.TrimSuffix(Path, "/"), http.RedirectHandler(Path, http.StatusMovedPermanently))
	mux.Handle("/", api)
	return mux
}
