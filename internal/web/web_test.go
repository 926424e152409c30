package web

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHandlerFS(t *testing.T) {
	fsys := fstest.MapFS{
		"index.html":            {Data: []byte("<!doctype html><title>ui</title>")},
		"assets/main-ABC123.js": {Data: []byte("console.log(1)")},
	}
	h := HandlerFS(fsys)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
		cache        string
	}{
		{"GET", "/", 200, "<title>ui</title>", "no-cache"},
		{"GET", "/processes", 200, "<title>ui</title>", "no-cache"},
		{"GET", "/process/123", 200, "<title>ui</title>", "no-cache"},
		{"GET", "/series/chart?match=%7Bmetric%3D%22a.b%22%7D", 200, "<title>ui</title>", "no-cache"},
		{"GET", "/index.html", 301, "", ""}, // http.FileServer's canonical redirect is not used: see below
		{"GET", "/assets/main-ABC123.js", 200, "console.log(1)", "public, max-age=31536000, immutable"},
		{"GET", "/assets/missing.js", 404, "", ""}, // errors are never cached
		{"GET", "/favicon.ico", 404, "", ""},
		{"GET", "/processes/", 200, "<title>ui</title>", "no-cache"}, // the router drops trailing slashes
		// Only the UI's routes get the page: anything else is an error a script can see.
		{"GET", "/status", 404, "404 page not found", ""},
		{"GET", "/all_processes", 404, "404 page not found", ""},
		{"GET", "/nope", 404, "404 page not found", ""},
		{"GET", "/process/abc", 404, "404 page not found", ""},
		{"GET", "/series/chart/x", 404, "404 page not found", ""},
		{"GET", "/other.html", 404, "404 page not found", ""},
		{"HEAD", "/nope", 404, "", ""},
		{"POST", "/", 405, "", ""},
	} {
		if tc.path == "/index.html" {
			// .html paths are routes: they get index.html itself, never a redirect.
			tc.code, tc.body, tc.cache = 200, "<title>ui</title>", "no-cache"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.code {
			t.Errorf("%s %s: code %d; want %d", tc.method, tc.path, rec.Code, tc.code)
		}
		if tc.body != "" && !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("%s %s: body %q; want it to contain %q", tc.method, tc.path, rec.Body.String(), tc.body)
		}
		if got := rec.Header().Get("Cache-Control"); got != tc.cache {
			t.Errorf("%s %s: Cache-Control %q; want %q", tc.method, tc.path, got, tc.cache)
		}
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s: X-Content-Type-Options %q; want nosniff", tc.method, tc.path, got)
		}
	}
}

func TestHandlerNotBuilt(t *testing.T) {
	h := HandlerFS(fstest.MapFS{".gitkeep": {}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/processes", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "make setup") {
		t.Errorf("unbuilt UI: %d %q; want 503 telling to run make setup", rec.Code, rec.Body.String())
	}
	if Built(fstest.MapFS{".gitkeep": {}}) {
		t.Error("Built(empty) = true; want false")
	}
}

// TestRoutesMatchUI: the pages the handler serves (Routes) are the routes of the UI's router in
// web/src/main.ts, so that a page added there is not a 404 here (and no other path is the page).
func TestRoutesMatchUI(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "web", "src", "main.ts"))
	if err != nil {
		t.Fatal(err)
	}
	var ui []string
	for _, m := range regexp.MustCompile(`\{ re: /(.*?)/, page:`).FindAllStringSubmatch(string(src), -1) {
		ui = append(ui, strings.ReplaceAll(m[1], `\/`, "/"))
	}
	if len(ui) == 0 {
		t.Fatal("no route found in web/src/main.ts")
	}
	if !slices.Equal(ui, Routes) {
		t.Errorf("web/src/main.ts routes %q; the handler's Routes %q", ui, Routes)
	}
}
