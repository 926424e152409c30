package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// sourcesHash is the hash web/build.mjs writes into dist/sources.sha256: sha256 over
// "path\0content\0" of every build input (web/src/**, build.mjs, package.json,
// package-lock.json, tsconfig.json), paths relative to web/ with "/", sorted.
func sourcesHash(t *testing.T, webDir string) string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(webDir, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(webDir, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "build.mjs", "package.json", "package-lock.json", "tsconfig.json")
	slices.Sort(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(webDir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(f + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestDistMatchesSources: the committed, embedded UI was built from the committed sources
// (so `go install` yields the UI the sources describe). After changing web/, run
// scripts/build-ui.sh and commit internal/web/dist with the sources.
func TestDistMatchesSources(t *testing.T) {
	dist := Dist()
	got, err := fs.ReadFile(dist, "sources.sha256")
	if err != nil {
		t.Fatalf("internal/web/dist has no sources.sha256 (%v): run scripts/build-ui.sh and commit internal/web/dist", err)
	}
	want := sourcesHash(t, filepath.Join(repoRoot(t), "web"))
	if strings.TrimSpace(string(got)) != want {
		t.Fatalf("internal/web/dist was built from other sources than web/ holds (dist says %s, web/ hashes to %s): run scripts/build-ui.sh and commit internal/web/dist", strings.TrimSpace(string(got)), want)
	}
}

// TestDistAssets: index.html names assets that are embedded, every asset has a gzip copy that
// decompresses to it (or none when gzip would not be smaller), and no source map ships.
func TestDistAssets(t *testing.T) {
	dist := Dist()
	index, err := fs.ReadFile(dist, "index.html")
	if err != nil {
		t.Fatalf("no embedded index.html: %v", err)
	}
	refs := regexp.MustCompile(`(?:src|href)="/(assets/[^"]+)"`).FindAllStringSubmatch(string(index), -1)
	if len(refs) < 2 {
		t.Fatalf("index.html names %d assets; want the script and the stylesheet:\n%s", len(refs), index)
	}
	for _, r := range refs {
		if _, err := fs.Stat(dist, r[1]); err != nil {
			t.Errorf("index.html names %s: %v", r[1], err)
		}
	}
	var raw, packed int
	err = fs.WalkDir(dist, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(p, ".map") {
			t.Errorf("%s: a source map is embedded (build without CANTAL_UI_SOURCEMAP=1)", p)
		}
		if strings.HasSuffix(p, ".gz") {
			if _, err := fs.Stat(dist, strings.TrimSuffix(p, ".gz")); err != nil {
				t.Errorf("%s without its asset", p)
			}
			return nil
		}
		body, _ := fs.ReadFile(dist, p)
		raw += len(body)
		gz, err := fs.ReadFile(dist, p+".gz")
		if err != nil {
			packed += len(body)
			return nil
		}
		packed += len(gz)
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Errorf("%s.gz: %v", p, err)
			return nil
		}
		plain, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(plain, body) {
			t.Errorf("%s.gz does not decompress to %s (err %v)", p, p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("assets: %d bytes, %d bytes as served gzipped", raw, packed)
}

func TestHandlerGzip(t *testing.T) {
	js := []byte(strings.Repeat("console.log(1);", 100))
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(js)
	zw.Close()
	h := HandlerFS(fstest.MapFS{
		"index.html":           {Data: []byte("<!doctype html>")},
		"assets/main-A.js":     {Data: js},
		"assets/main-A.js.gz":  {Data: z.Bytes()},
		"assets/plain-B.css":   {Data: []byte("a{}")},
		"assets/main-A.js.map": {Data: []byte("{}")},
	})
	for _, tc := range []struct {
		path, accept string
		gzip         bool
		code         int
		vary         bool
	}{
		{"/assets/main-A.js", "gzip, deflate, br", true, 200, true},
		{"/assets/main-A.js", "br;q=1.0, gzip;q=0.8", true, 200, true},
		{"/assets/main-A.js", "*", true, 200, true},
		{"/assets/main-A.js", "", false, 200, true},
		{"/assets/main-A.js", "gzip;q=0", false, 200, true},
		{"/assets/main-A.js", "identity", false, 200, true},
		{"/assets/plain-B.css", "gzip", false, 200, false},
		{"/assets/main-A.js.gz", "gzip", false, 404, false},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.accept != "" {
			req.Header.Set("Accept-Encoding", tc.accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s (Accept-Encoding %q): code %d; want %d", tc.path, tc.accept, rec.Code, tc.code)
			continue
		}
		if tc.code != 200 {
			continue
		}
		gotGzip := rec.Header().Get("Content-Encoding") == "gzip"
		if gotGzip != tc.gzip {
			t.Errorf("%s (Accept-Encoding %q): Content-Encoding %q; want gzip=%v", tc.path, tc.accept, rec.Header().Get("Content-Encoding"), tc.gzip)
		}
		if got := rec.Header().Get("Vary") == "Accept-Encoding"; got != tc.vary {
			t.Errorf("%s (Accept-Encoding %q): Vary %q; want Accept-Encoding=%v", tc.path, tc.accept, rec.Header().Get("Vary"), tc.vary)
		}
		if gotGzip {
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("%s: Content-Type %q; want text/javascript", tc.path, ct)
			}
			if !bytes.Equal(rec.Body.Bytes(), z.Bytes()) {
				t.Errorf("%s: gzip body differs from the precompressed file", tc.path)
			}
		} else if tc.path == "/assets/main-A.js" && !bytes.Equal(rec.Body.Bytes(), js) {
			t.Errorf("%s (Accept-Encoding %q): plain body differs", tc.path, tc.accept)
		}
	}
}

// FuzzAcceptsGzip: any Accept-Encoding header is answered without panic, and a header naming
// gzip alone is always accepted.
func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"", "gzip", "gzip;q=0", "br, gzip;q=0.5", "*;q=0", "GZIP ; Q = 1", "gzip;q=abc", ";;,,", "x-gzip;q=1;foo=bar"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		acceptsGzip([]string{v})
		if !acceptsGzip([]string{"gzip"}) {
			t.Fatal("gzip not accepted")
		}
	})
}
