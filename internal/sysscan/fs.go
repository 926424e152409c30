package sysscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errTooLong is returned when a file is longer than the cap its reader allows.
var errTooLong = errors.New("file longer than the read cap")

// openDir opens a directory to be used as the base of openAt.
func openDir(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}

// openAt opens name, a NUL-terminated path relative to dirfd, read-only, without allocating.
// The returned error is a bare unix.Errno so that callers can compare it cheaply.
func openAt(dirfd int, name []byte) (int, error) {
	if len(name) == 0 || name[len(name)-1] != 0 {
		return -1, unix.EINVAL
	}
	for {
		r, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])),
			uintptr(unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// readAll reads fd to the end into (*buf)[:0], growing *buf up to limit bytes. It returns the
// bytes read; when the file is longer than limit it returns the first limit bytes and errTooLong.
func readAll(fd int, buf *[]byte, limit int) ([]byte, error) {
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			if cap(b) >= limit {
				*buf = b
				return b, errTooLong
			}
			nb := make([]byte, len(b), min(limit, max(2*cap(b), 512)))
			copy(nb, b)
			b = nb
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			*buf = b
			return b, err
		}
		if n == 0 {
			*buf = b
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readFileAt opens name (NUL-terminated, relative to dirfd) and reads it whole with readAll.
func readFileAt(dirfd int, name []byte, buf *[]byte, limit int) ([]byte, error) {
	fd, err := openAt(dirfd, name)
	if err != nil {
		return nil, err
	}
	b, err := readAll(fd, buf, limit)
	unix.Close(fd)
	return b, err
}

// lineReader streams a file line by line through a fixed buffer, for files too big to hold
// whole (/proc/net/tcp with 100k sockets is 15 MB). The zero value is not usable: set buf.
type lineReader struct {
	buf []byte
}

// each calls fn with every line of fd, without its newline. The slice passed to fn is only valid
// during the call. A line longer than the buffer is an error.
func (lr *lineReader) each(fd int, fn func(line []byte)) error {
	start, end := 0, 0
	for {
		if end == len(lr.buf) {
			if start == 0 {
				return fmt.Errorf("line longer than %d bytes", len(lr.buf))
			}
			end = copy(lr.buf, lr.buf[start:end])
			start = 0
		}
		n, err := unix.Read(fd, lr.buf[end:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			if start < end {
				fn(lr.buf[start:end])
			}
			return nil
		}
		end += n
		for {
			i := indexByte(lr.buf[start:end], '\n')
			if i < 0 {
				break
			}
			fn(lr.buf[start : start+i])
			start += i + 1
		}
		if start == end {
			start, end = 0, 0
		}
	}
}

// pidDirs lists the numeric entries of an open /proc directory with getdents(2), reusing buf,
// and appends the pids to pids.
func pidDirs(dirfd int, buf []byte, pids []int) ([]int, error) {
	if _, err := unix.Seek(dirfd, 0, 0); err != nil {
		return pids, fmt.Errorf("rewind proc dir: %w", err)
	}
	for {
		n, err := unix.Getdents(dirfd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return pids, fmt.Errorf("list proc dir: %w", err)
		}
		if n <= 0 {
			return pids, nil
		}
		pids = parseDirents(buf[:n], pids)
	}
}

// parseDirents appends the numeric names found in a getdents64 buffer to pids.
func parseDirents(b []byte, pids []int) []int {
	// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
	const nameOff = 19
	for len(b) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			return pids
		}
		name := b[nameOff:reclen]
		if i := indexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if pid, ok := atoiPositive(name); ok {
			pids = append(pids, pid)
		}
		b = b[reclen:]
	}
	return pids
}

// atoiPositive parses a decimal pid; it rejects anything else, including a leading zero.
func atoiPositive(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 || b[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
