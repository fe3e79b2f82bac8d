package runner_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// checker is the protocol authors' client checker, beside this repository.
const checker = "../../../shared/conformance/plugrl-conformance"

// TestConformance runs the Go probe client (cmd/plugrl-probe, on this
// package) through plugrl-conformance --probe in every scenario, with and
// without reuse-feedback-obs, with float32 and float64 actions, and requires
// no violations and no advisory notes.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the checker runs")
	}
	if _, err := os.Stat(checker); err != nil {
		t.Skipf("plugrl-conformance not found at %s (../shared beside the repo)", checker)
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import websockets, msgpack, numpy").Run(); err != nil {
		t.Skip("Debian's python3 lacks websockets/msgpack/numpy: apt-get install -y python3-websockets python3-msgpack python3-numpy")
	}
	bin := filepath.Join(t.TempDir(), "plugrl-probe")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/plugrl-probe").CombinedOutput(); err != nil {
		t.Fatalf("building the probe client: %v\n%s", err, out)
	}
	for _, features := range []string{"", "reuse-feedback-obs"} {
		for _, dtype := range []string{"float32", "float64"} {
			name := fmt.Sprintf("features=%q/%s", features, dtype)
			t.Run(name, func(t *testing.T) {
				port := freePort(t)
				args := []string{"--probe", "--scenario", "all", "--timeout", "40", "--port", fmt.Sprint(port), "--action-dtype", dtype,
					"--client", fmt.Sprintf("%s --url ws://127.0.0.1:%d --envs 3 --timeout-ms 10000", bin, port)}
				if features != "" {
					args = append(args, "--features", features)
				}
				out, err := exec.Command(checker, args...).CombinedOutput()
				report := string(out)
				if err != nil {
					t.Fatalf("checker failed: %v\n%s", err, report)
				}
				if !strings.Contains(report, "\nno violations") || strings.Contains(report, "advisory note") {
					t.Fatalf("want no violations and no notes:\n%s", report)
				}
			})
		}
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
