// Command loadgen makes the agent's scale load: N processes (plain `sleep`s, so the load is the
// agent's and not the applications') each naming its own CANTAL_PATH with M metrics, whose values
// it updates in place every interval as real clients do. It runs until SIGINT/SIGTERM, then kills
// its processes and removes its files.
//
//	go run ./loadgen -apps 1000 -metrics 100
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	apps := flag.Int("apps", 1000, "processes")
	metrics := flag.Int("metrics", 100, "metrics per process (60% counters, 30% levels, 10% floats)")
	dir := flag.String("dir", "/dev/shm/cantal-load", "where the files go (a tmpfs)")
	every := flag.Duration("update", time.Second, "how often values change")
	flag.Parse()
	if err := run(*apps, *metrics, *dir, *every); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(apps, metrics int, dir string, every time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var meta strings.Builder
	for i := 0; i < metrics; i++ {
		switch {
		case i < metrics*6/10:
			fmt.Fprintf(&meta, "counter 8: {\"metric\": \"load.counter.%d\"}\n", i)
		case i < metrics*9/10:
			fmt.Fprintf(&meta, "level 8 signed: {\"metric\": \"load.level.%d\"}\n", i)
		default:
			fmt.Fprintf(&meta, "level 8 float: {\"metric\": \"load.float.%d\"}\n", i)
		}
	}
	files := make([]*os.File, apps)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	for a := 0; a < apps; a++ {
		base := filepath.Join(dir, fmt.Sprintf("app%d", a))
		if err := os.WriteFile(base+".values", make([]byte, 8*metrics), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(base+".meta", []byte(meta.String()), 0o644); err != nil {
			return err
		}
		f, err := os.OpenFile(base+".values", os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		files[a] = f
		cmd := exec.Command("sleep", "infinity")
		cmd.Env = append(os.Environ(), "CANTAL_PATH="+base, fmt.Sprintf("CANTAL_APPNAME=load%d", a))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start process %d: %w", a, err)
		}
		procs = append(procs, cmd)
	}
	fmt.Printf("loadgen: %d processes × %d metrics = %d series under %s\n", apps, metrics, apps*metrics, dir)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	t := time.NewTicker(every)
	defer t.Stop()
	buf := make([]byte, 8*metrics)
	for tick := uint64(1); ; tick++ {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		for a, f := range files {
			for i := 0; i < metrics; i++ {
				var v uint64
				switch {
				case i < metrics*6/10: // counters: steady, some idle
					if i%5 != 0 {
						v = tick * uint64(i+a)
					}
				case i < metrics*9/10: // levels: a slow random-ish walk
					v = uint64(int64(a+i) + int64(tick%17) - 8)
				default: // floats with two decimals
					v = math.Float64bits(float64((tick*uint64(i+1))%10000) / 100)
				}
				binary.NativeEndian.PutUint64(buf[8*i:], v)
			}
			if _, err := f.WriteAt(buf, 0); err != nil {
				return err
			}
		}
	}
}
