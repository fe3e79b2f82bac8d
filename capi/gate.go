package main

/*
#include <pthread.h>
#include "capi.h"
#include "plugrl.h"

// For TestThreadExitBracket: n threads, one after another, that each call
// into the library through an exported function and exit.
static void *plugrl__call_and_exit(void *arg) {
  (void)arg;
  (void)plugrl_version_number();
  return NULL;
}

static int plugrl__calls_from_exiting_threads(int n) {
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, plugrl__call_and_exit, NULL) != 0) {
      return i;
    }
    (void)pthread_join(t, NULL);
  }
  return n;
}
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

// callsInside is the number of calls the gate counts in progress.
func callsInside() int { return int(C.plugrl__gate_inside()) }

// callThroughWrappers makes a few calls through the exported C functions,
// as a C caller would, for tests of their bracket (Go test files cannot
// use cgo).
func callThroughWrappers() {
	_ = C.plugrl_version_number()
	_ = C.plugrl_version()
	_ = C.plugrl_status_str(C.PLUGRL_TIMEOUT)
	_ = C.plugrl_dtype_size(C.PLUGRL_DTYPE_F32)
	_ = C.plugrl_errmsg(nil)
	_ = C.plugrl_close(nil)
	_ = C.plugrl_runner_free(nil)
	var o C.plugrl_options
	_ = C.plugrl_options_init(&o)
}

// callsFromExitingThreads has n C threads in turn call into the library
// and exit, as a fleet's short-lived threads do; it returns how many it
// started. pthread_join returns after a thread's key destructors, the
// runtime's (dropm) and the gate's exit bracket, have run.
func callsFromExitingThreads(n int) int { return int(C.plugrl__calls_from_exiting_threads(C.int(n))) }
