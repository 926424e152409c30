// Command testapp is an instrumented application for the end-to-end tests: it publishes through
// package shm a counter growing at a steady rate, an integer level, a float level and a state,
// at CANTAL_PATH, until killed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cantal-go/cantal/shm"
)

func main() {
	rate := flag.Int("rate", 100, "counter increments per second")
	level := flag.Int64("level", -42, "integer level")
	float := flag.Float64("float", 2.5, "float level")
	state := flag.String("state", "serving", "state text")
	flag.Parse()

	c := shm.NewCollection(shm.Options{})
	requests := shm.Must(c.Counter(map[string]string{"metric": "requests.number"}))
	lvl := shm.Must(c.Integer(map[string]string{"metric": "queue.length"}))
	flt := shm.Must(c.Float(map[string]string{"metric": "temperature", "unit": "degC"}))
	st := shm.Must(c.State(map[string]string{"metric": "phase"}, 64))
	lvl.Set(*level)
	flt.Set(*float)
	st.Enter(*state)
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testapp:", err)
		os.Exit(1)
	}
	fmt.Println("started", c.Path())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// The counter follows rate × elapsed time exactly, however the ticks drift.
	tick := time.NewTicker(10 * time.Millisecond)
	start, done := time.Now(), uint64(0)
	for {
		select {
		case <-stop:
			c.Close()
			return
		case <-tick.C:
			want := uint64(time.Since(start).Seconds() * float64(*rate))
			requests.Add(want - done)
			done = want
		}
	}
}
