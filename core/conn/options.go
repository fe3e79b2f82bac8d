package conn

import (
	"errors"
	"fmt"
)

// ErrBadAPIKey: Options.APIKey cannot go into an HTTP header field.
var ErrBadAPIKey = errors.New("the API key cannot be sent")

// CheckAPIKey refuses an API key that an HTTP header field cannot hold
// (RFC 9110 5.5): one with a control character, a line break above all.
// net/http's header writer, which sends the upgrade request's fields,
// turned CR and LF into spaces (so "k\r\nX: y" went out as the key
// "k  X: y", never as a second field) and trimmed the ends, and let other
// control bytes through: the server was sent a key other than the one
// given. The message names the byte, never the key.
func CheckAPIKey(key string) error {
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x20 && b != '\t' || b == 0x7f {
			hint := ""
			if b == '\r' || b == '\n' {
				hint = " (a line ending read with the key from a file?)"
			}
			return fmt.Errorf("%w: it holds a control character (byte 0x%02x at offset %d of %d)%s, which an HTTP header field cannot", ErrBadAPIKey, b, i, len(key), hint)
		}
	}
	return nil
}
