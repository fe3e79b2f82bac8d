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

// version must match PLUGRL_VERSION_STRING in plugrl.h; versionNumber its
// PLUGRL_VERSION_NUMBER. A test checks both against the header.
const (
	version       = "0.1.0"
	versionNumber = 1000
)

func main() {}

//export plugrl_version
func plugrl_version() *C.plugrl_cchar { return versionCString }

//export plugrl_version_number
func plugrl_version_number() C.int { return versionNumber }

//export plugrl_status_str
func plugrl_status_str(status C.plugrl_status) (s *C.plugrl_cchar) {
	defer recoverString(&s)
	if status >= 0 && int(status) < len(statusNames) {
		return statusNames[status]
	}
	return unknownStatus
}

// The static names of helpers.c, looked up once: a call back into C from
// every plugrl_status_str cost as much as the call into Go itself.
var (
	statusNames   [C.PLUGRL_INTERRUPTED + 1]*C.plugrl_cchar
	unknownStatus = (*C.plugrl_cchar)(C.plugrl__status_name(-1))
)

func init() {
	for i := range statusNames {
		statusNames[i] = (*C.plugrl_cchar)(C.plugrl__status_name(C.int(i)))
	}
}

//export plugrl_dtype_size
func plugrl_dtype_size(dtype C.plugrl_dtype) (n C.size_t) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	d, ok := dtypeOf(dtype)
	if !ok {
		return 0
	}
	return C.size_t(d.Size)
}
