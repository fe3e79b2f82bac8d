package runner_test

import (
	"os"
	"testing"

	"github.com/plugrl/libplugrl/internal/childserver"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// The allocation test runs the server in a child process (this test
// binary, re-executed), so that the heap it measures is the runner's and
// its client's alone.
const childServerEnv = "PLUGRL_TEST_RUNNER_CHILD_SERVER"

func TestMain(m *testing.M) {
	childserver.Serve(childServerEnv, refserver.Config{Horizon: 4, ActionDim: 2, MaxLog: -1})
	os.Exit(m.Run())
}

// childServer starts a refserver (H=4, D=2, zero policy) in another
// process and returns its URL.
func childServer(tb testing.TB) string { return childserver.Start(tb, childServerEnv) }
