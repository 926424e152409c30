//go:build unix && !linux

package shm

// birthNs reports that creation times are not available on this system.
func birthNs(path string) (int64, bool) { return 0, false }
