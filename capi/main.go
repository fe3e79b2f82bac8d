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

import "github.com/plugrl/libplugrl/core/client"

// The version is plugrl.h's: PLUGRL_VERSION_STRING and
// PLUGRL_VERSION_NUMBER, read here through cgo, so the library cannot
// disagree with the header it was built with.
var versionCString = (*C.plugrl_cchar)(C.CString(C.PLUGRL_VERSION_STRING))

func main() {}

//export plugrl__go_version
func plugrl__go_version() *C.plugrl_cchar { return versionCString }

//export plugrl__go_version_number
func plugrl__go_version_number() C.int { return C.PLUGRL_VERSION_NUMBER }

//export plugrl__go_status_str
func plugrl__go_status_str(status C.plugrl_status) (s *C.plugrl_cchar) {
	defer recoverString(&s)
	if status >= 0 && int(status) < len(statusNames) {
		return statusNames[status]
	}
	return unknownStatus
}

// The names of client.Kinds as static C strings, made once: the table is
// the one place a status is named.
var (
	statusNames   [len(client.Kinds)]*C.plugrl_cchar
	unknownStatus = (*C.plugrl_cchar)(C.CString("unknown status"))
)

func init() {
	for i, k := range client.Kinds {
		statusNames[i] = (*C.plugrl_cchar)(C.CString(k.Name))
	}
}

//export plugrl__go_dtype_size
func plugrl__go_dtype_size(dtype C.plugrl_dtype) (n C.size_t) {
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
