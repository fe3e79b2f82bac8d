//go:build linux

package conn

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sendCallsChild, set in the environment, makes TestLargeWriteOneBlockingSend
// the child that strace watches.
const sendCallsChild = "PLUGRL_TEST_SENDCALLS_CHILD"

// The sizes the child writes, each its own message: a feedback's and a
// camera frame's. Neither appears as a length in any other send of the
// test binary.
const (
	sendCallsSmall = 1001
	sendCallsLarge = 8<<20 + 3
)

// TestLargeWriteOneBlockingSend: a message over dontWaitMax goes to the
// kernel in a blocking send, the first system call of its write, as a C
// client's does; a small one is first tried without waiting. The large one
// used to be tried without waiting too: the socket took part of it, and
// the rest went in a second call, which, with the server on the client's
// core, cost the client 8 % more CPU per exchange of the bench's LARGE
// workload than the C floor. The calls are seen with strace (skipped
// without it, or where ptrace is not allowed).
func TestLargeWriteOneBlockingSend(t *testing.T) {
	if os.Getenv(sendCallsChild) == "1" {
		sendCallsWrite(t)
		return
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed: the send calls cannot be seen")
	}
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, "-f", "-qq", "-e", "trace=sendto", "-e", "signal=none", "-o", trace,
		os.Args[0], "-test.run=^TestLargeWriteOneBlockingSend$", "-test.count=1")
	cmd.Env = append(os.Environ(), sendCallsChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("ptrace")) {
			t.Skipf("strace cannot trace here: %s", out)
		}
		// Under an emulator (cross_arm64 runs the tests with qemu-user),
		// the host's strace cannot execute the test binary itself.
		if bytes.Contains(out, []byte("Exec format error")) {
			t.Skipf("strace cannot run this test binary (another architecture, emulated): %s", out)
		}
		t.Fatalf("the traced child: %v\n%s", err, out)
	}
	text, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	// strace prints a send as sendto(FD, "..."..., LEN, FLAGS, NULL, 0) = N.
	call := regexp.MustCompile(`sendto\(\d+, .*, (\d+), ([A-Z_|]+), NULL, 0\)\s+= (-?\d+)`)
	var small, large []string // the flags of each size's first call, in order
	for _, line := range strings.Split(string(text), "\n") {
		m := call.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		switch n, _ := strconv.Atoi(m[1]); n {
		case sendCallsSmall:
			small = append(small, m[2])
		case sendCallsLarge:
			large = append(large, m[2])
		}
	}
	if len(small) != 1 || !strings.Contains(small[0], "MSG_DONTWAIT") {
		t.Errorf("the %d-byte message's sends of all of it: %q; want one, tried without waiting (MSG_DONTWAIT)", sendCallsSmall, small)
	}
	if len(large) != 1 || strings.Contains(large[0], "MSG_DONTWAIT") {
		t.Errorf("the %d-byte message's sends of all of it: %q; want one, that waits (no MSG_DONTWAIT)", sendCallsLarge, large)
	}
	if t.Failed() {
		t.Logf("strace's record:\n%s", text)
	}
}

// sendCallsWrite is the traced child: a small message and a large one,
// each written whole to a peer that reads everything.
func sendCallsWrite(t *testing.T) {
	f, read := fdPairDrained(t)
	for _, size := range []int{sendCallsSmall, sendCallsLarge} {
		f.beginWrite(10 * time.Second)
		if n, err := f.Write(bytes.Repeat([]byte{'x'}, size)); n != size || err != nil {
			t.Fatalf("Write of %d bytes: %d, %v", size, n, err)
		}
	}
	f.shutdown()
	if n := <-read; n != sendCallsSmall+sendCallsLarge {
		t.Fatalf("the peer read %d bytes; want %d", n, sendCallsSmall+sendCallsLarge)
	}
}
