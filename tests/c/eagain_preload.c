/*
** An LD_PRELOAD shim for CTest sigmask_eagain: the first pthread_create
** of the process fails with EAGAIN, as a pids limit reached for a moment
** does. In a host that creates no thread before main, that first call is
** the one that starts the Go runtime as libplugrl loads; runtime/cgo
** retries it, and the retry must still be created with every signal
** blocked (capi/helpers.c, thread_not_created): before, the retry took the
** next thread number and the host's signals reached the runtime's
** threads again.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static atomic_int calls;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
  if (atomic_fetch_add(&calls, 1) == 0) {
    return EAGAIN;
  }
  void *sym = dlsym(RTLD_NEXT, "pthread_create");
  create_fn real;
  if (sym == NULL) {
    return EAGAIN;
  }
  /* ISO C has no object-to-function pointer conversion; POSIX allows it. */
  __builtin_memcpy(&real, &sym, sizeof real);
  return real(thread, attr, start, arg);
}
