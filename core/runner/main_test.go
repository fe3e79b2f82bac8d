package runner_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/plugrl/libplugrl/internal/refserver"
)

// The allocation test runs the server in a child process (this test
// binary, re-executed), so that the heap it measures is the runner's and
// its client's alone.
const childServerEnv = "PLUGRL_TEST_RUNNER_CHILD_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(childServerEnv) != "" {
		s := refserver.New(refserver.Config{Horizon: 4, ActionDim: 2, MaxLog: -1})
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
	os.Exit(m.Run())
}

// childServer starts a refserver (H=4, D=2, zero policy) in another
// process and returns its URL.
func childServer(tb testing.TB) string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childServerEnv+"=1")
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
