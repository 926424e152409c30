package containers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for every parser of runtime state; run e.g.
//
//	go test -run '^$' -fuzz '^FuzzParsePodmanContainers$' -fuzztime 1m ./internal/containers

func checkIdentity(t *testing.T, id Identity) {
	if !utf8.ValidString(id.Name) || !utf8.ValidString(id.Image) || len(id.Name) > maxName || len(id.Image) > maxImage || len(id.ID) != 12 {
		t.Errorf("identity not a clean label set: %+v", id)
	}
	if strings.ContainsAny(id.Name+id.Image, "\x00\n\r") {
		t.Errorf("control characters kept: %+v", id)
	}
}

func FuzzParsePodmanContainers(f *testing.F) {
	f.Add(readFixture(f, "podman-containers.json"))
	f.Add([]byte(`[{"id":"` + probeID + `","names":["a\u0000b"]}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParsePodmanContainers(b)
		if err != nil {
			return
		}
		for id, ident := range m {
			if !isID(id) || ident.ID != id[:12] {
				t.Errorf("id %q → %+v", id, ident)
			}
			checkIdentity(t, ident)
		}
	})
}

func FuzzParseDockerConfig(f *testing.F) {
	f.Add(readFixture(f, "docker-config.v2.json"))
	f.Add([]byte(`{"ID":"` + dockID + `","Name":"/\u202e"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ident, err := ParseDockerConfig(b, dockID)
		if err == nil {
			checkIdentity(t, ident)
		}
	})
}

func FuzzFromCgroup(f *testing.F) {
	f.Add("libpod_parent.libpod-" + probeID)
	f.Add("/system.slice/docker-" + dockID + ".scope")
	f.Fuzz(func(t *testing.T, s string) {
		rt, id := FromCgroup(s)
		if (rt == NoRuntime) != (id == "") || (id != "" && (!isID(id) || !strings.Contains(s, id))) {
			t.Errorf("FromCgroup(%q) = %v, %q", s, rt, id)
		}
	})
}
