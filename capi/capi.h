/* Private to capi: declarations shared by every cgo preamble. Definitions
** live in helpers.c, because a preamble of a file with //export may only
** declare (cgo copies it into _cgo_export.c as well). */
#ifndef PLUGRL_CAPI_H
#define PLUGRL_CAPI_H

#include <stdint.h>
#include <stdlib.h>
#include "plugrl.h"

/* const-qualified aliases: cgo writes exported prototypes from Go types,
** and these make them read "const T *" so they match plugrl.h exactly. */
typedef const char plugrl_cchar;
typedef const int64_t plugrl_cint64;
typedef const uint8_t plugrl_cuint8;
typedef const float plugrl_cfloat;
typedef const double plugrl_cdouble;
typedef const plugrl_options plugrl_coptions;
typedef const plugrl_observation plugrl_cobservation;
typedef const plugrl_episode plugrl_cepisode;

/* Token layout (registry.go): TAG | generation << SLOT_BITS | slot. */
#define PLUGRL__SLOT_BITS 20
#define PLUGRL__TOKEN_TAG ((uint64_t)1 << 62)

plugrl_client *plugrl__client_token(uintptr_t id);
plugrl_runner *plugrl__runner_token(uintptr_t id);
/* Turns the calling thread's cancellation off, its type deferred first,
** storing the type and state it had where the pointers are not NULL
** (helpers.c says why in that order). */
void plugrl__cancellation_off(int *type, int *state);
void plugrl__call_log(plugrl_log_fn fn, void *user, int level, const char *message);
void plugrl__call_episode(plugrl_episode_fn fn, void *user, int64_t env, double ret, int64_t length, int success);
/* The calling thread, as a number no other live thread has. */
uint64_t plugrl__thread_self(void);

/* Nonzero in a child forked after the library was loaded: every handle is
** dead there (the parent's connections are not the child's to use). */
extern volatile int plugrl__forked;

/* The interrupt mailbox (helpers.c): an eventfd, and the slot table. */
int plugrl__interrupt_fd(void);
/* 0 if n (at most 8) more descriptors can be made now (they are made and
** closed again), else the errno that refused one (EMFILE, ENFILE). */
int plugrl__spare_descriptors(int n);
/* Adds SA_ONSTACK to every handler that lacks it (plugrl_fix_signal_handlers;
** also run by a thread's first call and by plugrl_open); returns how many
** it changed. */
int plugrl__onstack_all(void);
int plugrl__slot_publish(uint32_t index, uint64_t token, uint64_t target);
void plugrl__slot_retire(uint32_t index);
uint64_t plugrl__slot_take(uint32_t index);
/* How many times plugrl_interrupt_all has been called (helpers.c). */
uint64_t plugrl__interrupt_all_count(void);
/* The slot's raised token, for Go to read with sync/atomic (C memory,
** never freed). */
uint64_t *plugrl__slot_raised(uint32_t index);

/* Raises sysmon to the calling thread's real-time priority, if it has one
** (helpers.c); every blocking entry point calls it first. */
void plugrl__rt_ceiling(void);
/* A flag, nonzero once a real-time thread has called in, for Go to read
** atomically (runtime.go). */
int *plugrl__rt_seen(void);

/* The collection's gate (helpers.c). Every call into Go is bracketed by
** plugrl__gate_enter, which waits while the library collects, and
** plugrl__gate_leave. plugrl__collect_begin returns nonzero when the
** calling thread (in a call itself) is the only one in a call, and then
** holds every other call at the gate until plugrl__collect_end. */
void plugrl__gate_enter(void);
void plugrl__gate_leave(void);
/* Brackets the calling thread's exit like a call (its first call into Go
** calls it; helpers.c says why), and counts the thread among those bound
** until it exits. */
void plugrl__gate_bind_thread(void);
/* The threads that have called in and not exited, for Go to read
** atomically (runtime.go, fitProcs). */
int *plugrl__bound_threads(void);
/* 1, and plugrl__rt_seen's flag raised, if a thread that has called in
** and not exited runs real-time now; 2 if that is unknown (a bound thread
** could not be listed); else 0 (helpers.c). */
int plugrl__bound_realtime(void);
/* For the tests (gate.go, listFails): while nonzero, a thread's first
** call finds the list of bound threads unable to grow, as when out of
** memory. */
void plugrl__bound_list_fail(int on);
/* For the tests (gate.go, exitKeyFails): while nonzero, storing a value
** in the key of the exit bracket fails, as it may without memory. */
void plugrl__exit_key_fail(int on);
int plugrl__collect_begin(void);
void plugrl__collect_end(void);
/* The calls the gate counts in progress (for tests). */
int plugrl__gate_inside(void);

/* This thread's buffer of at least n bytes for plugrl_errmsg's copy (valid
** until the thread's next plugrl_errmsg or plugrl_runner_errmsg); NULL when
** memory ran out. */
char *plugrl__thread_buffer(size_t n);

#endif
