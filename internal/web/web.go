// Package web serves the agent's web UI: static assets built from /web (npm, uPlot) by
// `make setup` into dist/ and embedded here with go:embed, so the agent needs no CDN and no
// internet. Every page is a client-side route of index.html; unknown asset paths are 404.
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

// Handler serves the UI. Paths with a file extension are assets; every other path gets
// index.html so that each page's route is bookmarkable. Safe for concurrent use.
func Handler() http.Handler {
	sub, _ := fs.Sub(dist, "dist")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if path.Ext(r.URL.Path) != "" && !strings.HasSuffix(r.URL.Path, ".html") {
			if strings.HasPrefix(r.URL.Path, "/assets/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			files.ServeHTTP(w, r)
			return
		}
		index, err := fs.ReadFile(sub, "index.html")
		if err != nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`<!doctype html><title>cantal-agent</title><p>The web UI is not built into this binary: run <code>make setup build</code>. The API is at <a href="/api/v1/status">/api/v1/status</a>.`))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(index)
	})
}
