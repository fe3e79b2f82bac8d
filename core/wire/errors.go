package wire

// The two kinds of error the package returns: ErrInvalid for what a
// caller asked to encode, ErrMalformed for what a peer sent.

import (
	"errors"
	"fmt"
)

// ErrMalformed wraps every decoding error, so callers can tell a malformed
// peer message from their own mistakes with errors.Is.
var ErrMalformed = errors.New("malformed message")

func malformed(where string, err error) error {
	return fmt.Errorf("%w: %s: %v", ErrMalformed, where, err)
}

func malformedf(where, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, where, fmt.Sprintf(format, args...))
}

// ErrInvalid wraps every error about what a caller asked to encode, so it can
// be told apart from a malformed peer message.
var ErrInvalid = errors.New("invalid argument")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
