// Package kfile reads kernel files (procfs, sysfs) the way the scans need it: opened relative to
// a directory descriptor without allocating, kept open and re-read with one pread(2) from offset
// 0 (which makes the kernel generate the file afresh), read into buffers the caller reuses, and
// cut into lines and numbers by byte-level helpers that allocate nothing. It is shared by
// package sysscan (machine-wide files) and package procscan (the per-process scan).
//
// Everything here is a function of its arguments; a Kept or LineReader belongs to one goroutine.
package kfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrTooLong is returned when a file is longer than the cap its reader allows.
var ErrTooLong = errors.New("file longer than the read cap")

// OpenDir opens a directory to be used as the base of OpenAt.
func OpenDir(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}

// OpenAt opens name, a NUL-terminated path relative to dirfd, read-only, without allocating.
// The returned error is a bare unix.Errno so that callers can compare it cheaply.
func OpenAt(dirfd int, name []byte) (int, error) {
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

// ReadAll reads fd to the end into (*buf)[:0], growing *buf up to limit bytes. It returns the
// bytes read; when the file is longer than limit it returns the first limit bytes and ErrTooLong.
func ReadAll(fd int, buf *[]byte, limit int) ([]byte, error) {
	b := (*buf)[:0]
	for {
		if len(b) == cap(b) {
			if cap(b) >= limit {
				*buf = b
				return b, ErrTooLong
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

// ReadFileAt opens name (NUL-terminated, relative to dirfd) and reads it whole with ReadAll.
func ReadFileAt(dirfd int, name []byte, buf *[]byte, limit int) ([]byte, error) {
	fd, err := OpenAt(dirfd, name)
	if err != nil {
		return nil, err
	}
	b, err := ReadAll(fd, buf, limit)
	unix.Close(fd)
	return b, err
}

// LineReader streams a file line by line through a fixed buffer, for files too big to hold
// whole (/proc/net/tcp with 100k sockets is 15 MB). The zero value is not usable: set Buf.
type LineReader struct {
	Buf []byte
}

// Each calls fn with every line of fd, read from offset 0 with pread(2) so that a file kept
// open is generated afresh, without its newline. The slice passed to fn is only valid during
// the call. A line longer than the buffer is an error.
func (lr *LineReader) Each(fd int, fn func(line []byte)) error {
	start, end := 0, 0
	var off int64
	for {
		if end == len(lr.Buf) {
			if start == 0 {
				return fmt.Errorf("line longer than %d bytes", len(lr.Buf))
			}
			end = copy(lr.Buf, lr.Buf[start:end])
			start = 0
		}
		n, err := unix.Pread(fd, lr.Buf[end:], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += int64(n)
		if n == 0 {
			if start < end {
				fn(lr.Buf[start:end])
			}
			return nil
		}
		end += n
		for {
			i := IndexByte(lr.Buf[start:end], '\n')
			if i < 0 {
				break
			}
			fn(lr.Buf[start : start+i])
			start += i + 1
		}
		if start == end {
			start, end = 0, 0
		}
	}
}

// PIDDirs lists the numeric entries of an open /proc directory with getdents(2), reusing buf,
// and appends the pids to pids.
func PIDDirs(dirfd int, buf []byte, pids []int) ([]int, error) {
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
		pids = ParseDirents(buf[:n], pids)
	}
}

// ParseDirents appends the numeric names found in a getdents64 buffer to pids.
func ParseDirents(b []byte, pids []int) []int {
	// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
	const nameOff = 19
	for len(b) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			return pids
		}
		name := b[nameOff:reclen]
		if i := IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if pid, ok := AtoiPositive(name); ok {
			pids = append(pids, pid)
		}
		b = b[reclen:]
	}
	return pids
}

// AtoiPositive parses a decimal pid; it rejects anything else, including a leading zero.
func AtoiPositive(b []byte) (int, bool) {
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

// PreadAll reads fd from offset 0 into (*buf)[:0], growing *buf up to limit bytes. Reading a
// procfs file from offset 0 again makes the kernel generate it afresh, so a file kept open is
// re-read with one system call per scan instead of open, read, read and close.
//
// single says the file is generated as one piece (proc's single_open files: PID/stat, status,
// io, cgroup, meminfo, ...), or copied by one read up to the end of what it shows (PID/environ
// and cmdline copy the process's memory until the count or the area's end), so that a read
// shorter than the buffer is its end; other files (diskstats, net/dev) are read until pread
// returns 0.
func PreadAll(fd int, buf *[]byte, limit int, single bool) ([]byte, error) {
	b := (*buf)[:0]
	if cap(b) == 0 {
		b = make([]byte, 0, min(limit, 4096))
	}
	for {
		n, err := unix.Pread(fd, b[len(b):cap(b)], int64(len(b)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			*buf = b
			return b[:0], err
		}
		b = b[:len(b)+n]
		if n == 0 || (single && len(b) < cap(b)) {
			*buf = b
			return b, nil
		}
		if len(b) == cap(b) {
			if cap(b) >= limit {
				*buf = b
				return b, ErrTooLong
			}
			nb := make([]byte, len(b), min(limit, 2*cap(b)))
			copy(nb, b)
			b = nb
			if single { // a single-piece file must be read in one go to be consistent
				b = b[:0]
			}
		}
	}
}

// Kept is a procfs file kept open between scans and re-read with PreadAll. The zero value
// is closed.
type Kept struct {
	FD   int // valid when Open
	Open bool
}

// Read opens name (NUL-terminated, relative to dirfd) on first use and reads it whole. When
// the read fails the file is closed, so that the next scan opens it again.
func (k *Kept) Read(dirfd int, name []byte, buf *[]byte, limit int, single bool) ([]byte, error) {
	if !k.Open {
		fd, err := OpenAt(dirfd, name)
		if err != nil {
			return nil, err
		}
		k.FD, k.Open = fd, true
	}
	b, err := PreadAll(k.FD, buf, limit, single)
	if err != nil && !errors.Is(err, ErrTooLong) {
		k.Close()
	}
	return b, err
}

// Close closes the file when it is open.
func (k *Kept) Close() {
	if k.Open {
		unix.Close(k.FD)
		k.Open = false
	}
}

// ReadSingleAt opens name (NUL-terminated, relative to dirfd) and reads it with PreadAll as a
// file generated in one piece, then closes it.
func ReadSingleAt(dirfd int, name []byte, buf *[]byte, limit int) ([]byte, error) {
	fd, err := OpenAt(dirfd, name)
	if err != nil {
		return nil, err
	}
	b, err := PreadAll(fd, buf, limit, true)
	unix.Close(fd)
	return b, err
}
