/* The runtime's threads as libplugrl has them (capi/helpers.c, in short):
** created SCHED_OTHER from a real-time creator, and sysmon, the second
** thread the runtime creates, raised to the highest priority of the
** real-time callers (without that, a caller woken while sysmon held its
** goroutine's scan bit spun until the kernel's real-time throttling ran
** sysmon). pthread_create here is hidden (exports.map): it binds only
** runtime/cgo's calls inside the library, and finds the one every other
** caller gets (RTLD_DEFAULT: interposers included). Unlike libplugrl's,
** it leaves the threads' signal masks and CPUs alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static _Atomic(create_fn) real_create;
static _Atomic int created;
static pthread_t sysmon;
static _Atomic int sysmon_known;
static int ceiling;

static int realtime(int *priority) {
  int p = sched_getscheduler(0);
  if (p < 0) {
    return 0;
  }
  p &= ~SCHED_RESET_ON_FORK;
  if (p != SCHED_FIFO && p != SCHED_RR) {
    return 0;
  }
  struct sched_param sp;
  *priority = sched_getparam(0, &sp) == 0 ? sp.sched_priority : 0;
  return 1;
}

/* plugrl_gofloor_ceiling reports whether the calling thread runs
** real-time, and if it does, raises sysmon to its priority. Called with
** gofloor.go's procsMu held. */
int plugrl_gofloor_ceiling(void) {
  int priority;
  if (!realtime(&priority)) {
    return 0;
  }
  if (atomic_load(&sysmon_known) && priority > ceiling) {
    struct sched_param sp = {.sched_priority = priority};
    if (pthread_setschedparam(sysmon, SCHED_FIFO, &sp) == 0) {
      ceiling = priority;
    }
  }
  return 1;
}

__attribute__((visibility("hidden"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                                         void *(*start)(void *), void *arg) {
  create_fn real = atomic_load(&real_create);
  if (real == NULL) {
    real = (create_fn)dlsym(RTLD_DEFAULT, "pthread_create");
    if (real == NULL) {
      return EAGAIN;
    }
    atomic_store(&real_create, real);
  }
  /* Numbered before it exists (a thread created meanwhile must not take
  ** sysmon's number); a number not used is given back while the first two
  ** are made, as runtime/cgo retries a creation that failed. */
  int number = atomic_fetch_add(&created, 1);
  int priority;
  pthread_attr_t own, *a = (pthread_attr_t *)attr;
  int err;
  if (!realtime(&priority)) {
    err = real(thread, attr, start, arg);
  } else if (a == NULL && pthread_attr_init(&own) != 0) {
    err = EAGAIN;
  } else {
    if (a == NULL) {
      a = &own;
    }
    struct sched_param normal = {0};
    pthread_attr_setinheritsched(a, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(a, SCHED_OTHER);
    pthread_attr_setschedparam(a, &normal);
    err = real(thread, a, start, arg);
    if (a == &own) {
      pthread_attr_destroy(&own);
    }
  }
  if (err != 0 && number <= 1) {
    int next = number + 1;
    atomic_compare_exchange_strong(&created, &next, number);
  }
  if (err == 0 && number == 1) {
    sysmon = *thread;
    atomic_store(&sysmon_known, 1);
  }
  return err;
}
