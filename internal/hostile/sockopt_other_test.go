//go:build !unix

package hostile

import "testing"

// serverRecvBuffer cannot read SO_RCVBUF here: -1, and the check is skipped.
func serverRecvBuffer(t *testing.T, s *Server) int { return -1 }
