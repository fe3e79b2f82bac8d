package main

import "testing"

// TestZoneUnescaped: the %25 hint is for a bracketed IPv6 host whose zone
// is written bare, not for a '[' and a bad escape elsewhere in the URL.
func TestZoneUnescaped(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"ws://[fe80::1%eth0]:8000", true},
		{"wss://user:pw@[fe80::1%enp3s0]:8000/x", true},
		{"ws://[fe80::1%25eth0]:8000", false},
		{"ws://[::1]:8000", false},
		{"ws://127.0.0.1%eth0:8000", false},
		{"ws://host:8000/a[b%zz]", false},    // a path's bad escape
		{"ws://u:a[b%zz@[::1]:8000", false},  // a password's
		{"ws://u:a[b%zz]c@host:8000", false}, // a password's, brackets and all
		{"[fe80::1%eth0]:8000", true},        // the scheme missing too
	} {
		if got := zoneUnescaped(tc.url); got != tc.want {
			t.Errorf("zoneUnescaped(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
