// Package web serves the agent's web UI: static assets built from /web (TypeScript, uPlot,
// esbuild) by scripts/build-ui.sh into dist/ and embedded here with go:embed, so the agent
// needs no CDN and no internet. The built dist/ is committed with the sources (its
// sources.sha256 names the sources it was built from; TestDistMatchesSources fails when they
// differ), so `go install github.com/cantal-go/cantal/cmd/cantal-agent@version` yields the
// agent with its UI without node. Assets come precompressed (name.gz) and are served with
// Content-Encoding: gzip to clients that accept it. Every page is a client-side route of
// index.html (the routes of web/src/main.ts, listed in Routes); any other path, and asset paths
// that do not exist, are 404.
package web

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
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

// Routes are the UI's pages, the route patterns of web/src/main.ts (TestRoutesMatchUI keeps the
// two lists equal): only these paths, trailing slashes removed as the UI's router does, and
// /index.html get the page; any other path is 404, so that a script asking a path the agent
// does not serve (an old Cantal's /status, a typo) gets an error, not the UI's HTML.
var Routes = []string{
	`^/$`,
	`^/processes$`,
	`^/process/\d+$`,
	`^/series$`,
	`^/series/chart$`,
	`^/containers$`,
	`^/container/[^/]+$`,
	`^/cgroups$`,
	`^/network$`,
	`^/peers$`,
	`^/cluster$`,
}

// uiRoute matches the paths of Routes.
var uiRoute = regexp.MustCompile("(" + strings.Join(Routes, ")|(") + ")")

// isUIRoute reports whether p is one of the UI's pages (see Routes).
func isUIRoute(p string) bool {
	if p == "/index.html" {
		return true
	}
	if t := strings.TrimRight(p, "/"); t != "" {
		p = t
	} else {
		p = "/"
	}
	return uiRoute.MatchString(p)
}

// HandlerFS serves the UI in fsys. Paths with a file extension (other than .html) are
// assets, those under /assets/ content-hashed and cached as immutable; the UI's routes
// (Routes) get index.html, uncached, so that each page's route is bookmarkable and a rebuilt
// UI is picked up at once; every other path is 404. Without an index.html it answers 503 with
// a page saying how to build the UI. Safe for concurrent use; fsys must not change while it
// serves.
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
			if strings.HasSuffix(r.URL.Path, ".gz") {
				// The compressed copies are served only as an encoding of their asset.
				http.NotFound(w, r)
				return
			}
			if strings.HasPrefix(r.URL.Path, "/assets/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
				if serveGzip(w, r, fsys) {
					return
				}
			}
			files.ServeHTTP(w, r)
			return
		}
		if !isUIRoute(r.URL.Path) {
			http.Error(w, "404 page not found: the UI's pages are /, /processes, /series, /containers, /cgroups, /network, /peers, /cluster; the API is under /api/v1/", http.StatusNotFound)
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

// serveGzip answers with the precompressed copy of the asset (path + ".gz") when one exists,
// saying Vary: Accept-Encoding either way; it reports whether it answered. A client that does
// not accept gzip gets the plain file from the caller.
func serveGzip(w http.ResponseWriter, r *http.Request, fsys fs.FS) bool {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	gz, err := fs.ReadFile(fsys, name+".gz")
	if err != nil {
		return false
	}
	w.Header().Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r.Header.Values("Accept-Encoding")) {
		return false
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Encoding", "gzip")
	// Ranges and lengths refer to the gzip bytes, as HTTP says for a content coding.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(gz))
	return true
}

// acceptsGzip reports whether Accept-Encoding values allow gzip (or *) with a nonzero q.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
					f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
					if err != nil {
						f = 0
					}
					q = f
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}
