// Command ctrapp is the program inside the end-to-end tests' containers: a static binary,
// imported as the whole root of a locally built image (never pulled). With -burn it keeps one
// CPU busy (a container held at a CPU quota is then throttled); with -alloc it allocates and
// touches that many MiB (beyond a memory limit: the OOM killer), at start or on SIGUSR1; with -write it writes and
// syncs a file again and again (block I/O); with -udp it sends datagrams to an address
// (network traffic); otherwise it sleeps until killed.
package main

import (
	"flag"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	burn := flag.Bool("burn", false, "keep one CPU busy")
	alloc := flag.Int("alloc", 0, "MiB to allocate and touch")
	allocOnUSR1 := flag.Bool("alloc-on-usr1", false, "allocate -alloc MiB when SIGUSR1 comes, not at start")
	write := flag.String("write", "", "file to write 1 MiB to and fsync, every 100 ms")
	udp := flag.String("udp", "", "host:port to send a 1000-byte datagram to every 10 ms")
	flag.Parse()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if *burn {
		go func() {
			x := uint64(1)
			for {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}()
	}
	if *allocOnUSR1 {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		<-usr1
	}
	var keep [][]byte
	for i := 0; i < *alloc; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		keep = append(keep, b)
	}
	if *write != "" {
		go func() {
			buf := make([]byte, 1<<20)
			for {
				if f, err := os.OpenFile(*write, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
					f.Write(buf)
					f.Sync()
					f.Close()
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	if *udp != "" {
		go func() {
			buf := make([]byte, 1000)
			for {
				if c, err := net.Dial("udp", *udp); err == nil {
					c.Write(buf)
					c.Close()
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	<-stop
	_ = keep
}
