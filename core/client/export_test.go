package client

// PollReads is, for the external tests, how many of c's looks between
// calls read its socket (conn.Counters.PollReads).
func PollReads(c *Client) uint64 { return c.stats.io.PollReads.Load() }
