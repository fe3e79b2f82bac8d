package main

/*
#include "capi.h"
*/
import "C"

// The collection's gate (capi/helpers.c) as Go sees it. Every exported
// function's C wrapper brackets its call into Go with the gate; Go code
// that runs outside such a call (the tests) brackets itself with these.

// enterCall counts a call into the library in, waiting while the library
// collects.
func enterCall() { C.plugrl__gate_enter() }

// leaveCall counts the call out again.
func leaveCall() { C.plugrl__gate_leave() }

// collectBegin reports whether the caller, in a call itself, is the only
// one, and then holds every other call at the gate until collectEnd.
func collectBegin() bool { return C.plugrl__collect_begin() != 0 }

// collectEnd opens the gate.
func collectEnd() { C.plugrl__collect_end() }
