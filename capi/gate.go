package main

/*
#define _GNU_SOURCE // SCHED_BATCH, SCHED_RESET_ON_FORK
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "capi.h"
#include "plugrl.h"

// For TestThreadExitBracket: n threads, one after another, that each call
// into the library through an exported function that enters Go (not one
// of the helpers that answer in C: plugrl_version_number, used here
// before, binds no thread now) and exit.
static void *plugrl__call_and_exit(void *arg) {
  (void)arg;
  (void)plugrl_errmsg(NULL);
  return NULL;
}

// For TestFitProcs: threads that each call into the library and then
// wait, alive, until plugrl__release_threads (96 at most at a time).
static pthread_mutex_t plugrl__live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t plugrl__live_cv = PTHREAD_COND_INITIALIZER;
static int plugrl__live_called, plugrl__live_release;
static pthread_t plugrl__live[96];
static pid_t plugrl__live_tid[96];
static int plugrl__live_n;

static void *plugrl__call_and_wait(void *arg) {
  int i = (int)(intptr_t)arg;
  (void)plugrl_errmsg(NULL); // enters Go, which binds the thread
  pthread_mutex_lock(&plugrl__live_mu);
  plugrl__live_tid[i] = (pid_t)syscall(SYS_gettid);
  plugrl__live_called++;
  pthread_cond_broadcast(&plugrl__live_cv);
  while (!plugrl__live_release) {
    pthread_cond_wait(&plugrl__live_cv, &plugrl__live_mu);
  }
  pthread_mutex_unlock(&plugrl__live_mu);
  return NULL;
}

static int plugrl__start_live_threads(int n) {
  int started = 0;
  for (; started < n && plugrl__live_n < 96; started++) {
    if (pthread_create(&plugrl__live[plugrl__live_n], NULL, plugrl__call_and_wait, (void *)(intptr_t)plugrl__live_n) != 0) {
      break;
    }
    plugrl__live_n++;
    // One after another: a thread's first call is then the only call.
    pthread_mutex_lock(&plugrl__live_mu);
    while (plugrl__live_called < plugrl__live_n) {
      pthread_cond_wait(&plugrl__live_cv, &plugrl__live_mu);
    }
    pthread_mutex_unlock(&plugrl__live_mu);
  }
  return started;
}

// plugrl__live_set_policy sets live thread i's policy and priority as
// chrt -p or a real-time helper does, with sched_setscheduler on its tid
// (which glibc's cached policy does not see); 0 or an errno (EPERM where
// not permitted).
static int plugrl__live_set_policy(int i, int policy, int priority) {
  if (i < 0 || i >= plugrl__live_n) {
    return EINVAL;
  }
  struct sched_param param = {.sched_priority = priority};
  return sched_setscheduler(plugrl__live_tid[i], policy, &param) == 0 ? 0 : errno;
}

static void plugrl__release_threads(void) {
  pthread_mutex_lock(&plugrl__live_mu);
  plugrl__live_release = 1;
  pthread_cond_broadcast(&plugrl__live_cv);
  pthread_mutex_unlock(&plugrl__live_mu);
  for (int i = 0; i < plugrl__live_n; i++) {
    (void)pthread_join(plugrl__live[i], NULL);
  }
  plugrl__live_n = plugrl__live_called = plugrl__live_release = 0;
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

import "syscall"

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
	// The first four answer in C, without the bracket; the rest enter Go.
	_ = C.plugrl_version_number()
	_ = C.plugrl_version()
	_ = C.plugrl_status_str(C.PLUGRL_TIMEOUT)
	_ = C.plugrl_dtype_size(C.PLUGRL_DTYPE_F32)
	_ = C.plugrl_errmsg(nil)
	_ = C.plugrl_close(nil)
	_ = C.plugrl_runner_free(nil)
	var o C.plugrl_options
	_ = C.plugrl_options_init_size(&o, C.sizeof_plugrl_options)
}

// callsFromExitingThreads has n C threads in turn call into the library
// and exit, as a fleet's short-lived threads do; it returns how many it
// started. pthread_join returns after a thread's key destructors, the
// runtime's (dropm) and the gate's exit bracket, have run.
func callsFromExitingThreads(n int) int { return int(C.plugrl__calls_from_exiting_threads(C.int(n))) }

// startLiveThreads starts n more C threads (64 live at most), one after
// another, that each call into the library and then stay alive until
// releaseThreads; it returns when all have called in, with how many it
// started. Each thread's first call is the only call of these threads.
func startLiveThreads(n int) int { return int(C.plugrl__start_live_threads(C.int(n))) }

// releaseThreads lets startLiveThreads' threads exit and joins them (their
// key destructors, the gate's exit bracket among them, have run then).
func releaseThreads() { C.plugrl__release_threads() }

// The scheduling policies the tests give live threads.
const (
	policyOther       = int(C.SCHED_OTHER)
	policyFIFO        = int(C.SCHED_FIFO)
	policyBatch       = int(C.SCHED_BATCH)
	policyResetOnFork = int(C.SCHED_RESET_ON_FORK)
)

// setLivePolicy sets live thread i's (of startLiveThreads) policy and
// priority; it returns the errno of a refusal.
func setLivePolicy(i, policy, priority int) error {
	if e := C.plugrl__live_set_policy(C.int(i), C.int(policy), C.int(priority)); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

// listFails makes the list of bound threads unable to grow, as when out
// of memory, while on (plugrl__bound_list_fail).
func listFails(on bool) { C.plugrl__bound_list_fail(cBool(on)) }

func cBool(on bool) C.int {
	if on {
		return 1
	}
	return 0
}

// exitKeyFails makes storing a thread's state in the exit bracket's key
// fail, as when out of memory, while on (plugrl__exit_key_fail).
func exitKeyFails(on bool) { C.plugrl__exit_key_fail(cBool(on)) }

// boundRealtime is plugrl__bound_realtime: 1 if a bound thread runs
// real-time now (rtSeen raised), 2 if unknown, 0 if none.
func boundRealtime() int { return int(C.plugrl__bound_realtime()) }
