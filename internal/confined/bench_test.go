package confined

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkOpenAsCred measures an open resolved as another identity (a thread's fsuid, fsgid
// and groups changed and restored around it) against one resolved as the agent.
//
//	go test -run '^$' -bench OpenAs ./internal/confined/
func BenchmarkOpenAsCred(b *testing.B) {
	dir := b.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // the test directory's parent is 0700
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "f")
	os.WriteFile(path, []byte("x"), 0o644)
	os.Chown(path, 65534, 65534)
	for _, bc := range []struct {
		name string
		p    Policy
	}{
		{"agent", Policy{UID: 65534}},
		{"cred", Policy{UID: 65534, Cred: &Cred{UID: 65534, GID: 65534, Groups: []int{65534}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				f, err := bc.p.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
