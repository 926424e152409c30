// Command cantal-package writes the cantal packages from binaries already built (make package,
// make image):
//
//	cantal-package packages -version V -date UNIX -bins DIR -out DIR ARCH...
//	cantal-package image -version V -date UNIX -agent FILE -arch ARCH -out DIR
//
// Everything is in package build.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cantal-go/cantal/packaging/build"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cantal-package packages|image [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("cantal-package "+os.Args[1], flag.ExitOnError)
	version := fs.String("version", "", "package version")
	date := fs.Int64("date", 0, "modification time of the files, Unix seconds (the commit's)")
	out := fs.String("out", "dist", "output directory")
	bins := fs.String("bins", "dist/bin", "directory of ARCH/cantal-agent and ARCH/cantal")
	agent := fs.String("agent", "", "image: the static cantal-agent binary")
	arch := fs.String("arch", "amd64", "image: its architecture")
	fs.Parse(os.Args[2:])
	root, err := filepath.Abs(".")
	if err != nil {
		fail(err)
	}
	t := time.Unix(*date, 0).UTC()
	switch os.Args[1] {
	case "packages":
		paths, err := build.Packages(build.Options{Version: *version, Date: t, Root: root, Bins: *bins, Out: *out, Arches: fs.Args()})
		if err != nil {
			fail(err)
		}
		for _, p := range paths {
			fmt.Println(p)
		}
	case "image":
		p, err := build.Image(build.ImageOptions{Version: *version, Date: t, Agent: *agent, Arch: *arch, Out: *out})
		if err != nil {
			fail(err)
		}
		fmt.Println(p)
	default:
		fmt.Fprintln(os.Stderr, "usage: cantal-package packages|image [flags]")
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cantal-package:", err)
	os.Exit(1)
}
