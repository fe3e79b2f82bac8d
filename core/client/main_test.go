package client_test

import (
	"os"
	"testing"

	"github.com/plugrl/libplugrl/internal/childserver"
	"github.com/plugrl/libplugrl/internal/refserver"
)

// The allocation test and the benchmarks run the server in a child process
// (this test binary, re-executed), so that the heap they measure is the
// client's alone.
const childServerEnv = "PLUGRL_TEST_CHILD_SERVER"

func TestMain(m *testing.M) {
	childserver.Serve(childServerEnv, refserver.Config{Horizon: 8, ActionDim: 7, MaxLog: -1})
	os.Exit(m.Run())
}

// childServer starts a refserver (H=8, D=7, zero policy) in another process.
func childServer(tb testing.TB) string { return childserver.Start(tb, childServerEnv) }
