package main

import (
	"os"
	"runtime"
)

// The Go runtime inside libplugrl is the library's own, so the library
// tunes it for a caller that blocks in system calls on its own thread.
//
// GOMAXPROCS at least 2. With one P (a process pinned to one core gets
// GOMAXPROCS=1), Go's sysmon takes the P away from a thread that has sat in
// a system call for two of its ticks (20 us or more) whenever no other P is
// idle, and each time it does, it goes back to waking every 20 us. A
// caller that waits milliseconds for an action (or for the socket to drain
// a large observation) then pays dozens of sysmon wake-ups per exchange:
// measured, 11 % of the core for the 16-env image workload. A second, idle
// P makes sysmon leave such a thread alone until 10 ms have passed. No more
// threads run: the second P only ever runs the connection's poller.
// Setting GOMAXPROCS in the environment overrides this.
func init() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
}
