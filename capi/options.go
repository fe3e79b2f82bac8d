package main

// The options of plugrl_open: plugrl_options_init's defaults, and
// goOptions, which reads a caller's plugrl_options (of any size up to ours)
// into client.Options, with the ledger's path and level.

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/plugrl/libplugrl/core/client"
	"github.com/plugrl/libplugrl/core/conn"
	"github.com/plugrl/libplugrl/core/ledger"
)

// The sizes of plugrl_options a caller may hand in. A caller compiled
// against an older header has a smaller struct, one compiled against a
// newer header a larger one; `size` says which.
const (
	// optionsMinSize ends at max_backoff_ms, the last field of the first
	// plugrl_options: the smallest struct ever declared.
	optionsMinSize = unsafe.Offsetof(C.plugrl_options{}.max_backoff_ms) + unsafe.Sizeof(C.plugrl_options{}.max_backoff_ms)
	// optionsSize01 is sizeof(plugrl_options) in 0.1's header, which ends
	// at ledger_cpus: what the exported function plugrl_options_init fills,
	// for binaries built before plugrl_options_init became a macro that
	// passes its own sizeof to plugrl_options_init_size. It must never
	// change when fields are added.
	optionsSize01 = (unsafe.Offsetof(C.plugrl_options{}.ledger_cpus) + unsafe.Sizeof(C.plugrl_options{}.ledger_cpus) +
		unsafe.Alignof(C.plugrl_options{}) - 1) / unsafe.Alignof(C.plugrl_options{}) * unsafe.Alignof(C.plugrl_options{})
	// optionsMaxSize bounds what is read of a newer caller's struct: far
	// more than any header will declare, and little enough that a garbage
	// size is refused rather than followed through memory.
	optionsMaxSize = 4096
)

// optionsSizeOK reports whether size can be a header's
// sizeof(plugrl_options): within the bounds above, and a multiple of the
// struct's alignment, as every sizeof is. A size that is not ends inside a
// field, and a pointer field cut in two (tls_ca_file, ledger_path) read
// from the caller's bytes up to it is half an address, which the library
// then read and faulted on: such a size was never set, and is refused.
func optionsSizeOK(size C.size_t) bool {
	return uintptr(size) >= optionsMinSize && uintptr(size) <= optionsMaxSize && uintptr(size)%unsafe.Alignof(C.plugrl_options{}) == 0
}

//export plugrl__go_options_size_0_1
func plugrl__go_options_size_0_1() C.size_t { return C.size_t(optionsSize01) }

//export plugrl__go_options_init
func plugrl__go_options_init(o *C.plugrl_options, size C.size_t) (st C.plugrl_status) {
	defer recoverPlain(&st)
	if o == nil || !optionsSizeOK(size) {
		return C.PLUGRL_INVALID_ARGUMENT
	}
	def := C.plugrl_options{
		connect_timeout_ms:   10000,
		metadata_timeout_ms:  30000,
		receive_timeout_ms:   300000,
		max_reconnects:       5,
		reconnect_backoff_ms: 100,
		max_backoff_ms:       5000,
		send_timeout_ms:      10000,
		close_timeout_ms:     1000,
		reconnect_timeout_ms: 30000,
		max_handshake_size:   256 << 10,
		dead_peer_timeout_ms: C.int32_t(conn.DefaultDeadPeerTimeout / time.Millisecond),
	}
	def.size = size
	// Exactly size bytes: an older caller's struct ends there; a newer
	// caller's fields past ours are zero, which means their defaults.
	dst := unsafe.Slice((*byte)(unsafe.Pointer(o)), uintptr(size))
	clear(dst[copy(dst, unsafe.Slice((*byte)(unsafe.Pointer(&def)), unsafe.Sizeof(def))):])
	return C.PLUGRL_OK
}

// goOptions reads a plugrl_options of any size: fields past an older
// caller's size keep their defaults, and a newer caller's fields past ours
// must be zero (their defaults), as openat2 treats its struct: an option
// this library cannot honour is refused, not ignored.
func goOptions(o *C.plugrl_coptions, logf func(client.Level, string)) (client.Options, error) {
	var opts client.Options
	if o == nil {
		return opts, errors.New("options is NULL; fill a plugrl_options with plugrl_options_init")
	}
	if !optionsSizeOK(o.size) {
		return opts, fmt.Errorf("options.size is %d; call plugrl_options_init to set it (this library's plugrl_options has %d bytes; a size is a multiple of %d)", o.size, unsafe.Sizeof(*o), unsafe.Alignof(*o))
	}
	if uintptr(o.size) > unsafe.Sizeof(*o) {
		if at, err := firstNonzero(unsafe.Add(unsafe.Pointer(o), unsafe.Sizeof(*o)), uintptr(o.size)-unsafe.Sizeof(*o)); err != nil {
			return opts, fmt.Errorf("options.size is %d, but the bytes past this library's %d could not be read (%v); call plugrl_options_init to set it", o.size, unsafe.Sizeof(*o), err)
		} else if at >= 0 {
			return opts, fmt.Errorf("options sets a field at byte %d that libplugrl %s does not have (its plugrl_options has %d bytes, the caller's %d): the header is newer than the library; link the library of the same release, or leave that option 0",
				unsafe.Sizeof(*o)+uintptr(at), C.PLUGRL_VERSION_STRING, unsafe.Sizeof(*o), o.size)
		}
	}
	var full C.plugrl_options
	n := uintptr(o.size)
	if n > unsafe.Sizeof(full) {
		n = unsafe.Sizeof(full) // a newer caller whose extra bytes are zero
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&full)), n), unsafe.Slice((*byte)(unsafe.Pointer(o)), n))
	if full.url == nil {
		return opts, errors.New("options.url is NULL; want ws://host:port or wss://host:port")
	}
	rawURL := copyString(full.url)
	if u, err := url.Parse(rawURL); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		hint := ""
		if zoneUnescaped(rawURL) {
			// A robot cabled straight to its trainer reaches it at a
			// link-local address, which needs its interface (zone).
			hint = "; an IPv6 address's zone is written %25 in a URL (RFC 6874): ws://[fe80::1%25eth0]:8000"
		}
		return opts, fmt.Errorf("options.url %q is not a WebSocket URL; want ws://host:port or wss://host:port%s", conn.RedactedURL(rawURL), hint)
	}
	if err := conn.CheckURL(rawURL); err != nil {
		return opts, fmt.Errorf("options.url %q: %w", conn.RedactedURL(rawURL), err)
	}
	ms := func(v C.int32_t) time.Duration { return time.Duration(v) * time.Millisecond }
	opts = client.Options{
		URL:              rawURL,
		ConnectTimeout:   ms(full.connect_timeout_ms),
		MetadataTimeout:  ms(full.metadata_timeout_ms),
		ReceiveTimeout:   ms(full.receive_timeout_ms),
		MaxReconnects:    int(full.max_reconnects),
		ReconnectBackoff: ms(full.reconnect_backoff_ms),
		MaxBackoff:       ms(full.max_backoff_ms),
		MaxMessageSize:   int64(full.max_message_size),
		DisableReuse:     full.disable_reuse != 0,
		Alloc:            cAllocator{},
		Logf:             logf,
		// Fields a caller built against an older header did not have keep
		// their zero value here, which means the default.
		SendTimeout:      ms(full.send_timeout_ms),
		CloseTimeout:     ms(full.close_timeout_ms),
		ReconnectTimeout: ms(full.reconnect_timeout_ms),
		MaxHandshakeSize: int(full.max_handshake_size),
		DeadPeerTimeout:  ms(full.dead_peer_timeout_ms), // -1: off
		OpenWait:         ms(full.open_wait_ms),         // -1: until the server answers
	}
	if err := checkNumbers(&full); err != nil {
		return opts, err
	}
	if full.api_key != nil {
		opts.APIKey = copyString(full.api_key)
		if err := conn.CheckAPIKey(opts.APIKey); err != nil {
			return opts, fmt.Errorf("options.api_key: %w", err)
		}
	}
	if full.tls_ca_file != nil || full.tls_insecure != 0 {
		cfg := &tls.Config{InsecureSkipVerify: full.tls_insecure != 0}
		if full.tls_ca_file != nil {
			path := copyString(full.tls_ca_file)
			pem, err := readCAFile(path)
			if err != nil {
				return opts, fmt.Errorf("options.tls_ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opts, fmt.Errorf("options.tls_ca_file %s holds no PEM certificate", path)
			}
			cfg.RootCAs = pool
		}
		opts.TLS = cfg
	}
	path := getenv("PLUGRL_LEDGER")
	if full.ledger_path != nil {
		path = copyString(full.ledger_path)
	}
	if path != "" {
		level, err := ledgerLevel(int32(full.ledger_level))
		if err != nil {
			return opts, err
		}
		cpus, err := ledgerCPUs(full.ledger_cpus)
		if err != nil {
			return opts, err
		}
		// A directory, or a path used before, is resolved by ledger.Resolve.
		opts.LedgerPath, opts.LedgerLevel, opts.LedgerCPUs = path, level, cpus
		opts.Version = C.PLUGRL_VERSION_STRING
	}
	return opts, nil
}

// ledgerCPUs reads options.ledger_cpus, or PLUGRL_LEDGER_CPUS for NULL or
// "" (as plugrl.h says): none (nil) when neither is set or the one read is
// empty, as for PLUGRL_LEDGER.
func ledgerCPUs(list *C.char) ([]int, error) {
	what, s := "options.ledger_cpus", ""
	if list != nil {
		s = copyString(list)
	}
	if s == "" {
		what, s = "PLUGRL_LEDGER_CPUS", getenv("PLUGRL_LEDGER_CPUS")
	}
	if s == "" {
		return nil, nil
	}
	cpus, err := ledger.ParseCPUs(s)
	if err != nil {
		return nil, fmt.Errorf("%s is %q: %v", what, s, err)
	}
	return cpus, nil
}

// ledgerLevel reads options.ledger_level, or PLUGRL_LEDGER_LEVEL for 0.
func ledgerLevel(v int32) (ledger.Level, error) {
	switch v {
	case 0:
		env := getenv("PLUGRL_LEDGER_LEVEL")
		l, ok := ledger.ParseLevel(env)
		if !ok {
			return l, fmt.Errorf("PLUGRL_LEDGER_LEVEL is %q; want digest or full", env)
		}
		return l, nil
	case C.PLUGRL_LEDGER_DIGEST:
		return ledger.Digest, nil
	case C.PLUGRL_LEDGER_FULL:
		return ledger.Full, nil
	}
	return ledger.Digest, fmt.Errorf("options.ledger_level is %d; want 0, PLUGRL_LEDGER_DIGEST (1) or PLUGRL_LEDGER_FULL (2)", v)
}

// getenv reads the process's environment as C sees it, which a C
// program's setenv before plugrl_open changes; os.Getenv reads the copy Go
// took when the library was loaded.
func getenv(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if v := C.getenv(cname); v != nil {
		return copyString(v)
	}
	return ""
}

// checkNumbers refuses the numeric options that mean nothing: a negative
// timeout, backoff or handshake size (0 is the default, and there is no
// "none"), and a negative max_reconnects or max_message_size other than
// -1. Before, they were taken as the default, which a caller who meant -1
// as "no timeout" would not have guessed.
func checkNumbers(o *C.plugrl_options) error {
	for _, f := range []struct {
		name string
		v    C.int32_t
	}{
		{"connect_timeout_ms", o.connect_timeout_ms},
		{"metadata_timeout_ms", o.metadata_timeout_ms},
		{"receive_timeout_ms", o.receive_timeout_ms},
		{"reconnect_backoff_ms", o.reconnect_backoff_ms},
		{"max_backoff_ms", o.max_backoff_ms},
		{"send_timeout_ms", o.send_timeout_ms},
		{"close_timeout_ms", o.close_timeout_ms},
		{"reconnect_timeout_ms", o.reconnect_timeout_ms},
	} {
		if f.v < 0 {
			return fmt.Errorf("options.%s is %d; want milliseconds, or 0 for the default", f.name, int32(f.v))
		}
	}
	if v := o.dead_peer_timeout_ms; v < -1 || v > 0 && time.Duration(v)*time.Millisecond < conn.MinDeadPeerTimeout {
		return fmt.Errorf("options.dead_peer_timeout_ms is %d; want at least %d milliseconds (keepalive probes go at most once a second, and each needs time to be answered), 0 for the default or -1 for off", int32(v), conn.MinDeadPeerTimeout.Milliseconds())
	}
	if o.open_wait_ms < -1 {
		return fmt.Errorf("options.open_wait_ms is %d; want milliseconds, 0 for one attempt or -1 to wait until the server answers", int32(o.open_wait_ms))
	}
	if o.max_handshake_size < 0 {
		return fmt.Errorf("options.max_handshake_size is %d; want a size in bytes, or 0 for the default", int32(o.max_handshake_size))
	}
	if o.max_reconnects < -1 {
		return fmt.Errorf("options.max_reconnects is %d; want a count of attempts, 0 for the default or -1 for none", int32(o.max_reconnects))
	}
	if o.max_message_size < -1 {
		return fmt.Errorf("options.max_message_size is %d; want a size in bytes, 0 for the derived default or -1 for no cap", int64(o.max_message_size))
	}
	return nil
}

// maxCAFile bounds the CA file plugrl_open reads: a system bundle of every
// public root is about 220 KB.
const maxCAFile = 16 << 20

// readCAFile reads a PEM file of CAs, which must be a regular file of at
// most maxCAFile bytes. It is read before the client exists, where neither
// a timeout nor plugrl_interrupt reaches: a FIFO with no writer blocked
// plugrl_open for ever, and /dev/zero grew memory until the runtime
// aborted the process. O_NONBLOCK lets a FIFO's open return at once, so
// that the check can refuse it.
func readCAFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v); want a PEM file of CA certificates", path, fi.Mode().Type())
	}
	if fi.Size() > maxCAFile {
		return nil, fmt.Errorf("%s has %d bytes; a CA file may have at most %d", path, fi.Size(), maxCAFile)
	}
	// A file that grows while it is read stops at the bound all the same.
	pem, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, err
	}
	if len(pem) > maxCAFile {
		return nil, fmt.Errorf("%s has more than %d bytes; a CA file may have at most %d", path, maxCAFile, maxCAFile)
	}
	return pem, nil
}

// firstNonzero is the offset of the first nonzero byte of the n at p, or
// -1. p is a caller's memory past the struct we know, as far as its size
// says: a size that was never set (garbage) may point it at an unmapped
// page, which is an error here, not a crash. The bytes are copied by the
// kernel (a write into a pipe, which fails with EFAULT where they cannot
// be read), not read here: a fault would reach the host's SIGSEGV handler
// first where it has one (a crash reporter, a sanitizer), which would end
// the process.
func firstNonzero(p unsafe.Pointer, n uintptr) (at int, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer r.Close()
	defer w.Close()
	// n <= optionsMaxSize (4 KiB): within any pipe's buffer, so the write
	// does not wait for the read.
	k, err := w.Write(unsafe.Slice((*byte)(p), n))
	if err != nil {
		return -1, fmt.Errorf("no readable memory at or after byte %d of the %d after ours", k, n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return -1, err
	}
	for i, b := range buf {
		if b != 0 {
			return i, nil
		}
	}
	return -1, nil
}

// zoneUnescaped reports whether rawURL's host is a bracketed IPv6 address
// with a zone written as a bare % (fe80::1%eth0), which url.Parse refuses.
// Only the host is looked at (after any userinfo, before the path, query
// or fragment): a '[' and a bad escape in a password or a path are not a
// zone.
func zoneUnescaped(rawURL string) bool {
	host := rawURL // no scheme: the host comes first
	if _, rest, ok := strings.Cut(rawURL, "://"); ok {
		host = rest
	}
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	if i := strings.LastIndex(host, "@"); i >= 0 {
		host = host[i+1:]
	}
	end := strings.Index(host, "]")
	if !strings.HasPrefix(host, "[") || end < 0 {
		return false
	}
	i := strings.Index(host[:end], "%")
	return i >= 0 && !strings.HasPrefix(host[i:end], "%25")
}
