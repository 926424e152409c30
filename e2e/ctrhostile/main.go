// Command ctrhostile is the program inside the hostile containers of the end-to-end tests: a
// static binary, imported as the whole root of a locally built image (never pulled).
//
//	-fork N   forks N children that wait (raw fork: they share the parent's pages, so 5 000
//	          cost the machine little memory), then waits itself
//	-rename D changes its name (comm) and its command line every D, to names posing as the
//	          host's programs and holding control characters
//	(none)    waits until killed
//	-exit     exits at once (a container that starts and stops)
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// init keeps main on the process's first thread: PR_SET_NAME names the calling thread, and
// /proc/PID/comm (what -rename must change) is the first thread's name. Without it the renames
// went to whichever thread the goroutine ran on (CI at e3579d7: comm never changed).
func init() { runtime.LockOSThread() }

func main() {
	forks := flag.Int("fork", 0, "children to fork")
	rename := flag.Duration("rename", 0, "rename every")
	exit := flag.Bool("exit", false, "exit at once")
	flag.Parse()
	if *exit {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	for i := 0; i < *forks; i++ {
		pid, _, errno := syscall.RawSyscall(syscall.SYS_FORK, 0, 0, 0)
		if errno != 0 {
			fmt.Fprintf(os.Stderr, "fork %d: %v\n", i, errno)
			break
		}
		if pid == 0 {
			// The child: only raw system calls, no Go runtime (it has one thread, the
			// runtime's others are gone). It waits for a signal, which ends it.
			for {
				syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
			}
		}
	}
	if *forks > 0 {
		fmt.Println("forked")
	}
	if *rename > 0 {
		names := []string{"cantal-agent", "systemd", "sshd", "kworker/0:1", "evil\x1b[31m", "a\nb", "init"}
		// os.Args[0] shares the memory of the process's argv, which /proc/PID/cmdline shows.
		argv := unsafe.Slice(unsafe.StringData(os.Args[0]), len(os.Args[0]))
		for i := 0; ; i++ {
			n := names[i%len(names)]
			b := append([]byte(n+"\x00"), make([]byte, 16)...)
			syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0)
			for j := range argv {
				argv[j] = 0
				if j < len(n) {
					argv[j] = n[j]
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(*rename):
			}
		}
	}
	<-stop
}
