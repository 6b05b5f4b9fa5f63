// Command wslib measures WebSocket libraries for corral's hub: how much
// memory a server process spends per idle connection, and how the library
// answers a set of RFC 6455 conformance cases. It is a separate module so
// that the candidates stay out of corral's go.mod.
//
//	wslib idle -lib nbio -n 5000      # spawns a server and a client process
//	wslib conform -lib nbio           # runs the conformance cases in process
//	wslib all -n 5000                 # every library, idle then conform
//
// The server and client subcommands are the two halves that idle spawns.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// maxMessage is the read limit every server is configured with (the wire
// package's default max frame size).
const maxMessage = 64 << 10

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "server":
		err = runServer(args)
	case "client":
		err = runClient(args)
	case "idle":
		err = runIdle(args)
	case "conform":
		err = runConform(args)
	case "all":
		err = runAll(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wslib:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: wslib idle|conform|all|server|client [flags]\nlibraries: %s\n", strings.Join(libNames(), ", "))
	os.Exit(2)
}

func libNames() []string {
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runAll(args []string) error {
	fs := flag.NewFlagSet("all", flag.ExitOnError)
	n := fs.Int("n", 5000, "idle connections per library")
	libs := fs.String("libs", strings.Join(libNames(), ","), "comma-separated libraries")
	skipIdle := fs.Bool("skip-idle", false, "run only the conformance cases")
	_ = fs.Parse(args)
	for _, lib := range strings.Split(*libs, ",") {
		if !*skipIdle {
			if err := runIdle([]string{"-lib", lib, "-n", fmt.Sprint(*n)}); err != nil {
				fmt.Printf("%s idle: %v\n", lib, err)
			}
		}
		if err := runConform([]string{"-lib", lib}); err != nil {
			fmt.Printf("%s conform: %v\n", lib, err)
		}
	}
	return nil
}
