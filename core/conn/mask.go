package conn

import "github.com/plugrl/libplugrl/core/maskcopy"

// maskCopy sets dst[i] = src[i] ^ mask[(pos+i)%4] for every byte of src:
// the RFC 6455 mask applied during the one copy of a payload into the
// write buffer (fused, so the bytes are read once and written once).
// len(dst) must be at least len(src); dst may be src itself (masking in
// place), but the two must not otherwise overlap.
func maskCopy(dst, src []byte, mask [4]byte, pos int) {
	maskcopy.Copy(dst, src, maskcopy.Key(mask, pos))
}
