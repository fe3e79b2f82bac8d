package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -I${SRCDIR}
#include "capi.h"
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/plugrl/libplugrl/core/wire"
)

var dtypes = [...]wire.DType{
	C.PLUGRL_DTYPE_BOOL: wire.Bool,
	C.PLUGRL_DTYPE_U8:   wire.Uint8,
	C.PLUGRL_DTYPE_U16:  {Order: wire.NativeOrder, Kind: 'u', Size: 2},
	C.PLUGRL_DTYPE_U32:  {Order: wire.NativeOrder, Kind: 'u', Size: 4},
	C.PLUGRL_DTYPE_U64:  {Order: wire.NativeOrder, Kind: 'u', Size: 8},
	C.PLUGRL_DTYPE_I8:   wire.Int8,
	C.PLUGRL_DTYPE_I16:  {Order: wire.NativeOrder, Kind: 'i', Size: 2},
	C.PLUGRL_DTYPE_I32:  {Order: wire.NativeOrder, Kind: 'i', Size: 4},
	C.PLUGRL_DTYPE_I64:  wire.Int64,
	C.PLUGRL_DTYPE_F16:  {Order: wire.NativeOrder, Kind: 'f', Size: 2},
	C.PLUGRL_DTYPE_F32:  wire.Float32,
	C.PLUGRL_DTYPE_F64:  wire.Float64,
}

func dtypeOf(d C.plugrl_dtype) (wire.DType, bool) {
	if d < 1 || int(d) >= len(dtypes) {
		return wire.DType{}, false
	}
	return dtypes[d], true
}

// cDTypeOf maps a host-order numeric DType back to its enum value.
func cDTypeOf(d wire.DType) (C.plugrl_dtype, bool) {
	// An action's dtype, on every infer: float32 or float64 nearly always,
	// found without the table's walk.
	if d.Kind == 'f' && d.Size == 4 {
		return C.PLUGRL_DTYPE_F32, true
	}
	if d.Kind == 'f' && d.Size == 8 {
		return C.PLUGRL_DTYPE_F64, true
	}
	for i := 1; i < len(dtypes); i++ {
		if dtypes[i].Kind == d.Kind && dtypes[i].Size == d.Size {
			return C.plugrl_dtype(i), true
		}
	}
	return 0, false
}

// goString views a NUL-terminated C string as a Go string without copying;
// it is valid only during the call that received p.
func goString(p *C.plugrl_cchar) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return unsafe.String((*byte)(unsafe.Pointer(p)), n)
}

// copyString copies a NUL-terminated C string into Go memory, reading it a
// byte at a time up to its NUL and no further. C.GoString reads aligned 32-byte
// words (runtime.findnull), which may pass the end of the caller's
// allocation: harmless, but Valgrind reports it as an invalid read in the
// host's block, and would report a host's own unterminated string in the
// same place as the library's. Used where a string outlives the call
// (options); the hot path views strings with goString.
func copyString(p *C.char) string {
	return strings.Clone(goString((*C.plugrl_cchar)(unsafe.Pointer(p))))
}

// obsScratch turns plugrl_observation descriptors into a wire.Observation
// that views the caller's memory, reusing its slices across calls so the
// conversion allocates nothing in steady state.
type obsScratch struct {
	obs    wire.Observation
	images []wire.NamedArray
	states []wire.NamedArray
	shapes []int
	text   []string
}

// maxArrays bounds the number of named arrays in one observation, so a
// garbage count fails cleanly instead of allocating.
const maxArrays = 4096

// convert views o, the observation of a call about envs envs. Its text,
// if any, is one pointer per row of its arrays (the rows not reused), and
// a leading dimension over envs is refused before any is read: it made the
// text's read run past the caller's array (the core refuses such a shape
// too, but only after this).
func (s *obsScratch) convert(o *C.plugrl_cobservation, what string, envs int) (*wire.Observation, error) {
	if o == nil {
		return nil, fmt.Errorf("%s is NULL; pass a plugrl_observation (counts may be 0)", what)
	}
	if o.num_images > maxArrays || o.num_states > maxArrays {
		return nil, fmt.Errorf("%s has %d images and %d states; at most %d of each", what, o.num_images, o.num_states, maxArrays)
	}
	s.shapes = s.shapes[:0]
	var err error
	// The group's name is passed in two parts and joined only in an error
	// message: a concatenation here would allocate on every call.
	if s.images, err = s.arrays(s.images[:0], o.images, int(o.num_images), what, ".images"); err != nil {
		return nil, err
	}
	if s.states, err = s.arrays(s.states[:0], o.states, int(o.num_states), what, ".states"); err != nil {
		return nil, err
	}
	s.obs = wire.Observation{Images: s.images, States: s.states, TextAsStrings: o.text_as_strings != 0}
	if o.text != nil {
		rows := s.obs.Rows()
		if rows < 0 {
			return nil, fmt.Errorf("%s has text but no arrays, so its row count is unknown; add a state", what)
		}
		if rows > envs {
			return nil, fmt.Errorf("%s has text and arrays of %d rows, more than the call's %d envs; want a row (and a string) per env", what, rows, envs)
		}
		ptrs := unsafe.Slice((**C.plugrl_cchar)(unsafe.Pointer(o.text)), rows)
		s.text = s.text[:0]
		for i, p := range ptrs {
			if p == nil {
				return nil, fmt.Errorf("%s.text[%d] is NULL; pass \"\" for no text", what, i)
			}
			s.text = append(s.text, goString(p))
		}
		s.obs.Text = s.text
	}
	return &s.obs, nil
}

func (s *obsScratch) arrays(dst []wire.NamedArray, p *C.plugrl_array, n int, obs, group string) ([]wire.NamedArray, error) {
	if n == 0 {
		return dst, nil
	}
	if p == nil {
		return nil, fmt.Errorf("%s%s is NULL but its count is %d", obs, group, n)
	}
	what := obsGroup{obs, group}
	for i, a := range unsafe.Slice(p, n) {
		if a.name == nil {
			return nil, fmt.Errorf("%s[%d].name is NULL", what, i)
		}
		name := goString((*C.plugrl_cchar)(a.name))
		d, ok := dtypeOf(a.dtype)
		if !ok {
			return nil, fmt.Errorf("%s[%q]: "+unknownDTypeMsg, what, name, int(a.dtype))
		}
		if a.ndim < 1 || a.ndim > C.PLUGRL_MAX_DIMS {
			return nil, fmt.Errorf("%s[%q]: ndim is %d, want 1..%d (the leading dimension is the env count)", what, name, int(a.ndim), C.PLUGRL_MAX_DIMS)
		}
		if a.shape == nil {
			return nil, fmt.Errorf("%s[%q]: shape is NULL", what, name)
		}
		start := len(s.shapes)
		for j, v := range unsafe.Slice((*int64)(unsafe.Pointer(a.shape)), int(a.ndim)) {
			if v < 0 {
				return nil, fmt.Errorf("%s[%q]: shape[%d] is %d; dimensions are non-negative", what, name, j, v)
			}
			s.shapes = append(s.shapes, int(v))
		}
		// A later append may move s.shapes; this slice keeps the old array,
		// which holds the same values, so it stays correct.
		shape := s.shapes[start:len(s.shapes):len(s.shapes)]
		size, err := wire.ByteLen(d, shape)
		if err != nil {
			return nil, fmt.Errorf("%s[%q]: %v", what, name, err)
		}
		var data []byte
		if size > 0 {
			if a.data == nil {
				return nil, fmt.Errorf("%s[%q]: data is NULL, want %d bytes", what, name, size)
			}
			data = unsafe.Slice((*byte)(a.data), size)
		}
		dst = append(dst, wire.NamedArray{Name: name, Array: wire.Array{DType: d, Shape: shape, Data: data}})
	}
	return dst, nil
}

// obsGroup names a group of an observation in an error message, e.g.
// "obs.images", joined only when printed.
type obsGroup struct{ obs, group string }

func (g obsGroup) String() string { return g.obs + g.group }

// int64s views n C int64s.
func int64s(p *C.plugrl_cint64, n int) []int64 {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(p)), n)
}

// flags copies n C flags into dst as Go bools, normalised to 0 or 1: a C
// byte of 2 is not a valid Go bool.
func flags(dst []bool, p *C.plugrl_cuint8, n int) []bool {
	dst = dst[:0]
	for _, b := range unsafe.Slice((*byte)(unsafe.Pointer(p)), n) {
		dst = append(dst, b != 0)
	}
	return dst
}

// cAllocator gives the connection C memory to receive into, so an action
// handed to C is a view, never a copy (cgo forbids C holding Go memory).
type cAllocator struct{}

func (cAllocator) Grow(buf []byte, keep, size int) []byte {
	var old unsafe.Pointer
	if cap(buf) > 0 {
		old = unsafe.Pointer(unsafe.SliceData(buf))
	}
	p := C.realloc(old, C.size_t(size))
	if p == nil {
		return nil // the connection fails with "out of memory"; buf is still valid
	}
	return unsafe.Slice((*byte)(p), size)
}

func (cAllocator) Free(buf []byte) {
	if cap(buf) > 0 {
		C.free(unsafe.Pointer(unsafe.SliceData(buf)))
	}
}

// cBuffer is a growable C buffer owned by a handle.
type cBuffer struct {
	p    unsafe.Pointer
	size int
}

// reserve makes room for n bytes; nil when memory ran out (the old
// buffer is kept).
func (b *cBuffer) reserve(n int) unsafe.Pointer {
	if n > b.size {
		p := C.realloc(b.p, C.size_t(n))
		if p == nil {
			return nil
		}
		b.p, b.size = p, n
	}
	return b.p
}

func (b *cBuffer) free() {
	C.free(b.p)
	b.p, b.size = nil, 0
}

// bufferSize is a C buffer's size as an int. A size_t above math.MaxInt
// (SIZE_MAX, or a negative number passed as a size) is no buffer's size:
// ok is false, and the caller reports it instead of slicing memory that
// does not exist.
func bufferSize(size C.size_t) (n int, ok bool) {
	if uint64(size) > math.MaxInt {
		return 0, false
	}
	return int(size), true
}

// badSizeMsg is the message for a size bufferSize refuses.
const badSizeMsg = "%s is %d bytes, more than any buffer can hold: pass the buffer's size in bytes"

// zero sets a result pointer of the caller's to its zero value, if it is
// not NULL. A call that writes its results through the caller's pointers
// (present, length, value, yes, steps, known, step_size, runner, and
// plugrl_infer's action) zeroes
// each before anything can fail, so that
// whatever the status, the caller never reads what was there before: a C
// caller's uninitialised "present" after PLUGRL_BUSY or PLUGRL_CLOSED read
// as a found key. A fault there is ignored (the memory is the caller's):
// the call meets it again when it writes its result, inside its own
// recover, and reports it as PLUGRL_INVALID_ARGUMENT.
func zero[T any](p *T) {
	if p != nil {
		defer ignoreFault()
		var z T
		*p = z
	}
}

// ignoreFault swallows the memory fault of a zeroing store (see above).
func ignoreFault() { _ = recover() }
