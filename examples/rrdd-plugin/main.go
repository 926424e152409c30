// Command rrdd-plugin is an example XAPI rrdd plugin written with package rrdd: every few seconds
// it publishes the host's load average, free memory and its own loop counter to
// /dev/shm/metrics/<name> (protocol v2 by default), where xcp-rrdd and cantal-agent read it.
// On SIGINT or SIGTERM it removes its file.
//
//	go run ./examples/rrdd-plugin -name example -interval 5s
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cantal-go/cantal/rrdd"
)

func main() {
	dir := flag.String("dir", "/dev/shm/metrics", "directory of plugin files")
	name := flag.String("name", "cantal-example", "plugin name (the file name)")
	interval := flag.Duration("interval", 5*time.Second, "time between updates")
	v1 := flag.Bool("v1", false, "write protocol v1 (JSON) instead of v2")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, filepath.Join(*dir, *name), *interval, *v1, log); err != nil {
		log.Error("rrdd plugin failed", "err", err)
		os.Exit(1)
	}
}

func datasources() []rrdd.Datasource {
	load := rrdd.NewDatasource("loadavg_1m", rrdd.Float)
	load.Description, load.Type, load.Default, load.Min = "Load average over one minute", rrdd.Gauge, true, 0
	free := rrdd.NewDatasource("memory_available_kib", rrdd.Int64)
	free.Description, free.Type, free.Units, free.Min = "MemAvailable from /proc/meminfo", rrdd.Gauge, "KiB", 0
	loops := rrdd.NewDatasource("plugin_updates", rrdd.Int64)
	loops.Description, loops.Type = "Updates written by this plugin", rrdd.Derive
	return []rrdd.Datasource{load, free, loops}
}

func run(ctx context.Context, path string, interval time.Duration, v1 bool, log *slog.Logger) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create plugin directory: %w", err)
	}
	proto := rrdd.V2
	if v1 {
		proto = rrdd.V1
	}
	w, err := rrdd.Create(path, proto, datasources())
	if err != nil {
		return err
	}
	defer w.Close() // removes the file
	log.Info("publishing", "path", path, "protocol", proto, "interval", interval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := int64(1); ; n++ {
		load, err := loadavg()
		if err != nil {
			log.Warn("read load average", "err", err)
			load = math.NaN()
		}
		avail, err := memAvailable()
		if err != nil {
			log.Warn("read meminfo", "err", err)
		}
		vals := []rrdd.Value{rrdd.FloatValue(load), rrdd.IntValue(avail), rrdd.IntValue(n)}
		if err := w.Write(time.Now(), vals); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			log.Info("stopping")
			return nil
		case <-tick.C:
		}
	}
}

func loadavg() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("empty /proc/loadavg")
	}
	return strconv.ParseFloat(f[0], 64)
}

func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				return strconv.ParseInt(fields[0], 10, 64)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no MemAvailable in /proc/meminfo")
}
