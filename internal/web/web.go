// Package web serves the agent's web UI: static assets built from /web (TypeScript, uPlot,
// esbuild) by `make setup` (scripts/build-ui.sh) into dist/ and embedded here with go:embed,
// so the agent needs no CDN and no internet. Every page is a client-side route of
// index.html; asset paths that do not exist are 404.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the embedded build output (index.html and assets/). It holds only .gitkeep
// when the UI was not built before the binary.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: cannot happen
	}
	return sub
}

// Built reports whether fsys holds a built UI (an index.html).
func Built(fsys fs.FS) bool {
	_, err := fs.Stat(fsys, "index.html")
	return err == nil
}

// Handler serves the embedded UI; see HandlerFS. Safe for concurrent use.
func Handler() http.Handler { return HandlerFS(Dist()) }

// HandlerFS serves the UI in fsys. Paths with a file extension (other than .html) are
// assets, those under /assets/ content-hashed and cached as immutable; every other path gets
// index.html, uncached, so that each page's route is bookmarkable and a rebuilt UI is picked
// up at once. Without an index.html it answers 503 with a page saying how to build the UI.
// Safe for concurrent use; fsys must not change while it serves.
func HandlerFS(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if path.Ext(r.URL.Path) != "" && !strings.HasSuffix(r.URL.Path, ".html") {
			if strings.HasPrefix(r.URL.Path, "/assets/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			files.ServeHTTP(w, r)
			return
		}
		index, err := fs.ReadFile(fsys, "index.html")
		if err != nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`<!doctype html><title>cantal-agent</title><p>The web UI is not built into this binary: run <code>make setup build</code>. The API is at <a href="/api/v1/status">/api/v1/status</a>.`))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'")
		w.Write(index)
	})
}
