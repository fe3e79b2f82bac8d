// Command capi is libplugrl.so: the C ABI of include/plugrl.h over the Go
// core. Build it with go build -buildmode=c-shared (see build.sh). Every
// exported function recovers panics, validates every pointer and shape it
// is given before using it, and returns a plugrl_status.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

func main() {}

// plugrl_version, plugrl_version_number, plugrl_status_str and
// plugrl_dtype_size are C (exports.c), so that a signal handler may call
// them: they never enter Go. Their answers are checked against the Go
// tables here (TestStatusStrMatchesKinds, TestDtypeSizeMatchesWire)
// through cStatusStr, cDtypeSize and wireDtypeSize, since a test file cannot use cgo.

// cStatusStr is plugrl_status_str(status) as a Go string.
func cStatusStr(status int) string {
	return C.GoString(C.plugrl_status_str(C.plugrl_status(status)))
}

// cDtypeSize is plugrl_dtype_size(dtype).
func cDtypeSize(dtype int) int { return int(C.plugrl_dtype_size(C.plugrl_dtype(dtype))) }

// wireDtypeSize is the size of the wire's dtype for the enum value dtype,
// 0 for a value that is no dtype: what plugrl_dtype_size must give.
func wireDtypeSize(dtype int) int {
	if d, ok := dtypeOf(C.plugrl_dtype(dtype)); ok {
		return d.Size
	}
	return 0
}

// internalText is plugrl_status_str(PLUGRL_INTERNAL): static C memory,
// what recoverString gives a string export that panicked.
var internalText = (*C.plugrl_cchar)(C.plugrl_status_str(C.PLUGRL_INTERNAL))
