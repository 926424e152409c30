// Command ctrapp is the program inside the end-to-end tests' containers: a static binary,
// imported as the whole root of a locally built image (never pulled). With -burn it keeps one
// CPU busy (a container held at a CPU quota is then throttled); otherwise it sleeps until killed.
package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	burn := flag.Bool("burn", false, "keep one CPU busy")
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
	<-stop
}
