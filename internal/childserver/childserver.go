// Package childserver runs a reference server in a child process for a
// test: the test binary re-executed, so that what the test measures of
// its own process (allocations, heap) is the client's alone. A package's
// TestMain calls Serve first; a test calls Start.
package childserver

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// Serve serves cfg and exits, if this process is a child that Start made
// with env set; otherwise it returns at once. Call it first in TestMain.
func Serve(env string, cfg refserver.Config) {
	if os.Getenv(env) == "" {
		return
	}
	s := refserver.New(cfg)
	url, err := s.Listen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(url)
	// Serve until the parent closes our stdin.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// Start starts this test binary again as a child whose TestMain serves
// (Serve, with env set), and returns the server's URL; the child ends
// with the test.
func Start(tb testing.TB, env string) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("child server: %v", err)
	}
	return strings.TrimSpace(line)
}
