package access

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// HidePID reports whether the proc file system mounted at procRoot hides other users'
// processes (mount option hidepid=1, 2, noaccess or invisible), reading procRoot's own
// self/mountinfo.
func HidePID(procRoot string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "self", "mountinfo"))
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	abs, err := filepath.Abs(procRoot)
	if err != nil {
		return false, err
	}
	return parseHidePID(b, filepath.Clean(abs)), nil
}

// parseHidePID finds the last proc mount at mountPoint in a mountinfo table (proc(5)) and tells
// whether its super options hide processes. Malformed lines are skipped.
func parseHidePID(mountinfo []byte, mountPoint string) bool {
	hidden := false
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f) {
			continue
		}
		if unescapeMount(f[4]) != mountPoint || f[sep+1] != "proc" {
			continue
		}
		hidden = false // a later mount over the same point hides the earlier one
		for _, o := range strings.Split(f[sep+3], ",") {
			if v, ok := strings.CutPrefix(o, "hidepid="); ok {
				hidden = v != "0" && v != "off"
			}
		}
	}
	return hidden
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOct(s[i+1]) && isOct(s[i+2]) && isOct(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOct(c byte) bool { return c >= '0' && c <= '7' }
