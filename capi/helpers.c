#define _GNU_SOURCE
#include "capi.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Handles are tokens, never dereferenced: see registry.go. */
plugrl_client *plugrl__client_token(uintptr_t id) { return (plugrl_client *)id; }
plugrl_runner *plugrl__runner_token(uintptr_t id) { return (plugrl_runner *)id; }

/* The type first: a pthread_cancel that saw the thread enabled and
** asynchronous sends it SIGCANCEL, and glibc before 2.41 acts on that
** signal when it arrives if the type is still asynchronous, whatever the
** state (its handler looks at the type alone). With the state turned off
** first, a thread making calls back to back was unwound from inside Go,
** and its exit then spun for ever in the runtime's dropm. Deferred, the
** handler only marks the thread cancelled. Used as a call begins
** (exports.c, enter), as a callback returns and as a thread
** that called in exits (exit_bracket). */
void plugrl__cancellation_off(int *type, int *state) {
  pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, type);
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, state);
}

/* A callback runs inside a call, with the thread's cancellation off and
** its type deferred, and the rest of the call must run so too. One that
** turned cancellation back on and left it on (itself, or a library it
** calls) left the rest of the call cancellable: asynchronously, anywhere
** in Go; deferred, at any cancellation point in C that the rest of the
** call reaches. So both are put back as it returns. Inside a call both
** are known, and unchanged they are only read. */
void plugrl__call_log(plugrl_log_fn fn, void *user, int level, const char *message) {
  fn(user, level, message);
  plugrl__cancellation_off(NULL, NULL);
}

void plugrl__call_episode(plugrl_episode_fn fn, void *user, int64_t env, double ret, int64_t length, int success) {
  fn(user, env, ret, length, success);
  plugrl__cancellation_off(NULL, NULL);
}

uint64_t plugrl__thread_self(void) { return (uint64_t)(uintptr_t)pthread_self(); }

/* ------------------------------------------------------------------------
** The slot table: what plugrl_interrupt needs to find a handle without
** entering Go, since it must be async-signal-safe (a signal handler may
** call it, and Go code must not run there). Go publishes each live
** handle's token in its slot; plugrl_interrupt checks the token, raises
** the slot's flag and writes to an eventfd; a goroutine blocked on that
** eventfd (registry.go) takes the flags and interrupts the handles. Only
** lock-free atomics and write(2) are used on the signal side.
*/
#define SLOT_PAGE_BITS 12
#define SLOT_PAGES (1u << (PLUGRL__SLOT_BITS - SLOT_PAGE_BITS))
#define SLOT_PAGE_SIZE (1u << SLOT_PAGE_BITS)

typedef struct slot {
  _Atomic uint64_t token;  /* the live handle's token; 0: none */
  _Atomic uint64_t target; /* the token whose slot plugrl_interrupt raises */
  /* An interrupt not yet taken by Go: the token it was raised for (0:
  ** none). A token, not a flag, so that an interrupt raised as the slot
  ** was being reused for another handle is not taken by that handle. */
  _Atomic uint64_t raised;
} slot;

static _Atomic(slot *) slot_pages[SLOT_PAGES];
static int interrupt_fd = -1;

/* Set in a forked child: see plugrl__forked in capi.h. */
volatile int plugrl__forked = 0;

static void on_fork_child(void) { plugrl__forked = 1; }

static void exit_bracket(void *state);
static pthread_key_t exit_key; /* see plugrl__gate_bind_thread */

/* main_left runs when the main thread ends with pthread_exit (a key's
** destructor; exit() and a return from main run none): it starts the
** watch for the host's last thread ("The last thread", below) also when
** main never called in and no thread that did exits after it. */
static void watch_for_last_thread(void);
static pthread_key_t main_key;
static void main_left(void *unused) {
  (void)unused;
  if (!plugrl__forked) {
    watch_for_last_thread();
  }
}

__attribute__((constructor)) static void plugrl__init_c(void) {
  pthread_atfork(NULL, NULL, on_fork_child);
  /* Created at load, before the Go runtime creates the key whose
  ** destructor unbinds an exiting thread from Go: glibc runs a round of
  ** destructors in the order of the keys' creation. */
  (void)pthread_key_create(&exit_key, exit_bracket);
  /* Loaded by the main thread (linked, or dlopen()ed from main): note its
  ** end. */
  if ((pid_t)syscall(SYS_gettid) == getpid() && pthread_key_create(&main_key, main_left) == 0) {
    (void)pthread_setspecific(main_key, (void *)1);
  }
}

int plugrl__interrupt_fd(void) {
  if (interrupt_fd < 0) {
    interrupt_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  return interrupt_fd;
}

int plugrl__spare_descriptors(int n) {
  int fds[8];
  int got = 0, err = 0;
  if (n > 8) {
    n = 8;
  }
  for (; got < n; got++) {
    fds[got] = eventfd(0, EFD_CLOEXEC);
    if (fds[got] < 0) {
      err = errno;
      break;
    }
  }
  while (got > 0) {
    close(fds[--got]);
  }
  return err;
}

static slot *slot_of(uint32_t index, int create) {
  if (index >= (1u << PLUGRL__SLOT_BITS)) {
    return NULL;
  }
  slot *page = atomic_load(&slot_pages[index >> SLOT_PAGE_BITS]);
  if (page == NULL && create) {
    /* Called with Go's registry lock held: no race between creators. */
    page = calloc(SLOT_PAGE_SIZE, sizeof(slot));
    if (page == NULL) {
      return NULL;
    }
    atomic_store(&slot_pages[index >> SLOT_PAGE_BITS], page);
  }
  return page ? &page[index & (SLOT_PAGE_SIZE - 1)] : NULL;
}

int plugrl__slot_publish(uint32_t index, uint64_t token, uint64_t target) {
  slot *s = slot_of(index, 1);
  if (s == NULL) {
    return -1;
  }
  atomic_store(&s->raised, 0);
  atomic_store(&s->target, target);
  atomic_store(&s->token, token);
  return 0;
}

void plugrl__slot_retire(uint32_t index) {
  slot *s = slot_of(index, 0);
  if (s != NULL) {
    atomic_store(&s->token, 0);
    atomic_store(&s->raised, 0);
  }
}

uint64_t *plugrl__slot_raised(uint32_t index) {
  slot *s = slot_of(index, 0);
  return s ? (uint64_t *)&s->raised : NULL;
}

uint64_t plugrl__slot_take(uint32_t index) {
  slot *s = slot_of(index, 0);
  return s != NULL ? atomic_exchange(&s->raised, 0) : 0;
}

/* The slot whose token is token, or NULL. */
static slot *live_slot(uint64_t token) {
  if ((token & PLUGRL__TOKEN_TAG) != PLUGRL__TOKEN_TAG || plugrl__forked) {
    return NULL;
  }
  slot *s = slot_of((uint32_t)(token & ((1u << PLUGRL__SLOT_BITS) - 1)), 0);
  return s != NULL && atomic_load(&s->token) == token ? s : NULL;
}

/* Wakes the goroutine that takes raised interrupts. */
static void wake_taker(void) {
  if (interrupt_fd >= 0) {
    int saved = errno; /* a signal handler must leave errno as it found it */
    uint64_t one = 1;
    ssize_t n = write(interrupt_fd, &one, sizeof one);
    (void)n; /* EAGAIN: the counter is full, so the reader is awake anyway */
    errno = saved;
  }
}

/* Raises the interrupt of the client or runner (runner nonzero) token
** names; a token of the other kind is CLOSED, as everywhere else. */
static plugrl_status raise_interrupt(uint64_t token, int runner) {
  slot *s = live_slot(token);
  if (s == NULL) {
    return PLUGRL_CLOSED;
  }
  uint64_t target = atomic_load(&s->target);
  if ((target != token) != (runner != 0)) {
    return PLUGRL_CLOSED; /* a client's slot targets itself, a runner's its client */
  }
  slot *t = target == token ? s : live_slot(target);
  if (t == NULL) {
    return PLUGRL_CLOSED;
  }
  atomic_store(&t->raised, target);
  wake_taker();
  return PLUGRL_OK;
}

/* How many times plugrl_interrupt_all was called: the taker compares it
** with the count it last saw, to interrupt the closes under way too (their
** handles are retired from the slots already). */
static _Atomic uint64_t interrupt_all_count;

uint64_t plugrl__interrupt_all_count(void) { return atomic_load(&interrupt_all_count); }

plugrl_status plugrl_interrupt_all(void) {
  if (plugrl__forked) {
    return PLUGRL_CLOSED;
  }
  atomic_fetch_add(&interrupt_all_count, 1);
  for (uint32_t p = 0; p < SLOT_PAGES; p++) {
    slot *page = atomic_load(&slot_pages[p]);
    if (page == NULL) {
      continue;
    }
    for (uint32_t i = 0; i < SLOT_PAGE_SIZE; i++) {
      uint64_t token = atomic_load(&page[i].token);
      /* A client's slot targets itself; a runner's targets its client. */
      if (token != 0 && atomic_load(&page[i].target) == token) {
        atomic_store(&page[i].raised, token);
      }
    }
  }
  wake_taker();
  return PLUGRL_OK;
}

plugrl_status plugrl_interrupt(plugrl_client *client) { return raise_interrupt((uint64_t)(uintptr_t)client, 0); }

plugrl_status plugrl_runner_interrupt(plugrl_runner *runner) {
  return raise_interrupt((uint64_t)(uintptr_t)runner, 1);
}

/* ------------------------------------------------------------------------
** Per-thread message buffers for plugrl_errmsg: each thread reads its own
** copy, made under the handle's lock, so no thread ever sees a message
** another is writing, and a copy stays valid whatever other threads do.
*/
typedef struct tls_buf {
  char *p;
  size_t cap;
} tls_buf;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *v) {
  tls_buf *b = v;
  free(b->p);
  free(b);
}

static void tls_init(void) { (void)pthread_key_create(&tls_key, tls_free); }

char *plugrl__thread_buffer(size_t n) {
  pthread_once(&tls_once, tls_init);
  tls_buf *b = pthread_getspecific(tls_key);
  if (b == NULL) {
    b = calloc(1, sizeof *b);
    if (b == NULL || pthread_setspecific(tls_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (b->cap < n) {
    char *p = realloc(b->p, n);
    if (p == NULL) {
      return NULL;
    }
    b->p = p;
    b->cap = n;
  }
  return b->p;
}

/* ------------------------------------------------------------------------
** The signal-handler remedy: see plugrl_fix_signal_handlers in plugrl.h.
** plugrl_open and each thread's first call apply it too
** (plugrl__onstack_all), as the Go runtime does at load for the handlers
** installed before it (not SIGCONT's, SIGTSTP's, SIGTTIN's or SIGTTOU's:
** initsig skips _SigDefault): a SIGPROF profiler's
** handler without SA_ONSTACK (gperftools', whose CPUPROFILE starts it
** before main) ran on goroutine stacks, past their ends, and the
** collector then found its heap corrupted ("fatal error: found pointer to
** free object"; the bench client with 16 envs of images under CPUPROFILE
** at 1000 Hz, 3 of 13 runs of 3 s).
*/

/* same_action reports whether a and b are the same action: handler,
** flags and mask (both read into zeroed structs: glibc fills only the
** kernel's part of sa_mask). */
static int same_action(const struct sigaction *a, const struct sigaction *b) {
  return a->sa_handler == b->sa_handler && a->sa_flags == b->sa_flags &&
         memcmp(&a->sa_mask, &b->sa_mask, sizeof a->sa_mask) == 0;
}

/* add_onstack adds SA_ONSTACK to sig's handler if it is a function that
** lacks it, keeping the rest, and returns 1 if it did. Reading and writing
** are two system calls, and a host thread may install a handler between
** them: the write returns the action it replaced, and one that is not what
** was read (the host's new handler) is put back as it was. Between the two
** writes the action read is live again, and a third install in that window
** is overwritten by the put-back: sigaction has no compare-and-swap. */
static int add_onstack(int sig) {
  struct sigaction seen, fixed, replaced;
  memset(&seen, 0, sizeof seen);
  memset(&replaced, 0, sizeof replaced);
  if (sigaction(sig, NULL, &seen) != 0 || seen.sa_handler == SIG_DFL || seen.sa_handler == SIG_IGN ||
      (seen.sa_flags & SA_ONSTACK)) {
    return 0;
  }
  fixed = seen;
  fixed.sa_flags |= SA_ONSTACK;
  if (sigaction(sig, &fixed, &replaced) != 0) {
    return 0;
  }
  if (!same_action(&replaced, &seen)) {
    sigaction(sig, &replaced, NULL);
    return 0;
  }
  return 1;
}

int plugrl__onstack_all(void) {
  int fixed = 0;
  for (int sig = 1; sig < NSIG; sig++) {
    if (sig != SIGKILL && sig != SIGSTOP) {
      fixed += add_onstack(sig);
    }
  }
  return fixed;
}

int plugrl_fix_signal_handlers(void) { return plugrl__onstack_all(); }

/* ------------------------------------------------------------------------
** Real-time callers. A robot's control loop calls in from a thread under
** SCHED_FIFO or SCHED_RR (or the whole process runs under chrt). A thread
** inherits its creator's scheduling policy (glibc's default,
** PTHREAD_INHERIT_SCHED), and the Go runtime creates its threads from
** whichever thread needs one, at load time from the loading thread: they
** came out real-time too. One of them spinning in the scheduler then held
** the caller's core at the caller's own priority, and under SCHED_FIFO the
** caller never ran again (the 16-env image bench hung on one core).
**
** So inside libplugrl.so, pthread_create is this function: runtime/cgo's
** calls bind to it at link time (it is hidden, and the version script
** exports nothing but plugrl_*), and nothing outside the library sees it.
** A thread created from a real-time (or SCHED_DEADLINE) thread is created
** SCHED_OTHER, priority 0, and one created from a thread pinned to other
** CPUs than the runtime's gets the runtime's (runtime_cpus, below); any
** other is created exactly as asked.
*/
typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* realtime_policy reports whether the kernel runs thread tid (0: the
** calling thread) under a real-time policy (SCHED_FIFO, SCHED_RR) or
** SCHED_DEADLINE, and stores the policy, without SCHED_RESET_ON_FORK. It
** asks the kernel: glibc's pthread_getschedparam answers from a copy it
** keeps in the thread's descriptor once read, which only
** pthread_setschedparam updates, so a thread made real-time with
** sched_setscheduler or `chrt -p` after its policy was first read looked
** SCHED_OTHER to it for good. A tid that has exited answers ESRCH: not
** real-time. */
static int realtime_policy(pid_t tid, int *policy) {
  int p = sched_getscheduler(tid);
  if (p < 0) {
    return 0;
  }
  *policy = p & ~SCHED_RESET_ON_FORK;
  return *policy == SCHED_FIFO || *policy == SCHED_RR || *policy == SCHED_DEADLINE;
}

/* realtime reports whether the calling thread runs real-time (see
** realtime_policy), and its policy and parameters. */
static int realtime(int *policy, struct sched_param *param) {
  if (!realtime_policy(0, policy)) {
    return 0;
  }
  if (sched_getparam(0, param) != 0) {
    param->sched_priority = 0;
  }
  return 1;
}

/* The runtime's threads, numbered in the order pthread_create is called
** for them (below), and the second of them, which is sysmon (see
** plugrl__rt_ceiling). */
static _Atomic int threads_created;
static pthread_t sysmon_thread;
static _Atomic int sysmon_known;

/* thread_number numbers a runtime thread about to be created: the second
** is sysmon. The first is the thread that starts the runtime as the
** library loads; it runs runtime.main, which creates sysmon before any
** other thread. The number is taken before the thread exists, not after
** pthread_create returns: numbered on return, a creator preempted between
** the two (a loaded machine) let a thread made meanwhile by sysmon, or by
** a thread it woke, take the second number. That thread was then taken
** for sysmon; when it later became the ledger's writer, pinned to its
** own CPUs, every thread the runtime created took the writer's CPUs as
** the runtime's (runtime_cpus) and was pinned there too (tests/ledger.sh
** found 2-4 threads on the writer's CPU in about 1 run of 8 under load). */
static int thread_number(void) { return atomic_fetch_add(&threads_created, 1); }

/* thread_not_created gives back the number of a thread that could not be
** created, when it is the first or the second. runtime/cgo retries a
** pthread_create that failed with EAGAIN (_cgo_try_pthread_create: a
** pids limit or the kernel's thread limit reached for a moment, up to 20
** tries), and each try took the next number: a first thread created at
** its second try was number 1, so it was created with the loading
** thread's signals (every runtime thread then let the host's signals in,
** and a SIGINT for a sigwait ended the process), and was taken for
** sysmon. Until those two exist no other runtime thread can be created
** (the first creates sysmon before any other thread), so no one else
** holds a number; later numbers are only counted. */
static void thread_not_created(int number) {
  if (number <= 1) {
    int next = number + 1;
    atomic_compare_exchange_strong(&threads_created, &next, number);
  }
}

/* The names of the library's own threads (see "The last thread" below):
** the runtime's, and the one that watches for the host's last thread. */
static const char runtime_thread_name[] = "plugrl-go";
static const char exit_watch_name[] = "plugrl-exit";

/* created notes the thread numbered number, just created as t, and names
** it (a debugger and top show it too). */
static void created(int number, pthread_t t) {
  if (number == 1) {
    sysmon_thread = t;
    atomic_store(&sysmon_known, 1);
  }
  pthread_setname_np(t, runtime_thread_name);
}

/* runtime_cpus stores in set the CPUs the runtime's threads run on, and
** returns 1, when a thread created now would otherwise get others: a
** caller's thread pinned to its own core (a control loop on an isolated
** CPU) passes its mask on to the threads the runtime creates from it,
** which then ran the runtime's work (the ledger's writer, the collector,
** the hand-offs of other callers) on the loop's core while other cores
** sat idle, and, on a core where a real-time loop spins, could not run at
** all. The reference is sysmon's mask, read now: sysmon is the runtime's
** own from the start and never a caller, and a process-wide change (taskset
** -a -p) reaches it too. */
static int runtime_cpus(cpu_set_t *set) {
  if (!atomic_load(&sysmon_known) || plugrl__forked) {
    return 0;
  }
  cpu_set_t own;
  /* Zeroed first, though glibc clears what the kernel leaves: a
  ** MemorySanitizer whose runtime does not intercept
  ** pthread_getaffinity_np (clang 14's) sees the masks as never written. */
  CPU_ZERO(set);
  CPU_ZERO(&own);
  if (pthread_getaffinity_np(sysmon_thread, sizeof *set, set) != 0 ||
      pthread_getaffinity_np(pthread_self(), sizeof own, &own) != 0) {
    return 0; /* more CPUs than a cpu_set_t holds: as the creator's */
  }
  return !CPU_EQUAL(set, &own);
}

/* create_thread creates the runtime's thread numbered number (see
** thread_number), SCHED_OTHER and on the runtime's CPUs (above). */
static pthread_create_fn real_pthread_create(void) {
  static _Atomic(pthread_create_fn) real;
  pthread_create_fn create = atomic_load(&real);
  if (create == NULL) {
    /* RTLD_DEFAULT, not RTLD_NEXT: this wrapper is not in the dynamic
    ** symbol table, so the default search finds what every other
    ** pthread_create caller gets, interposers (sanitizers, preloads)
    ** included. */
    create = (pthread_create_fn)dlsym(RTLD_DEFAULT, "pthread_create");
    atomic_store(&real, create);
  }
  return create;
}

static int create_thread(int number, pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                         void *arg) {
  pthread_create_fn create = real_pthread_create();
  if (create == NULL) {
    return EAGAIN;
  }
  int policy;
  struct sched_param param;
  cpu_set_t cpus;
  /* Real-time (SCHED_FIFO, SCHED_RR) and SCHED_DEADLINE, whose threads
  ** cannot even create threads that inherit it: create SCHED_OTHER. */
  int rt = realtime(&policy, &param);
  int pin = runtime_cpus(&cpus);
  if (!rt && !pin) {
    int err = create(thread, attr, start, arg);
    if (err == 0) {
      created(number, *thread);
    }
    return err;
  }
  pthread_attr_t own;
  pthread_attr_t *a = (pthread_attr_t *)attr; /* runtime/cgo's, made for this call */
  int err;
  if (a == NULL) {
    if (pthread_attr_init(&own) != 0) {
      return EAGAIN;
    }
    a = &own;
  }
  if (rt) {
    struct sched_param normal = {0};
    pthread_attr_setinheritsched(a, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(a, SCHED_OTHER);
    pthread_attr_setschedparam(a, &normal);
  }
  if (pin && pthread_attr_setaffinity_np(a, sizeof cpus, &cpus) != 0) {
    pin = 0;
  }
  err = create(thread, a, start, arg);
  if (err != 0 && pin) {
    /* The mask refused (a cpuset changed under it): the creator's, as
    ** before, rather than no thread. */
    cpu_set_t mine;
    if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0 &&
        pthread_attr_setaffinity_np(a, sizeof mine, &mine) == 0) {
      err = create(thread, a, start, arg);
    }
  }
  if (a == &own) {
    pthread_attr_destroy(&own);
  }
  if (err == 0) {
    created(number, *thread);
  }
  return err;
}

/* ------------------------------------------------------------------------
** The host's signals stay the host's. A control process often blocks
** SIGINT and SIGTERM (and the rest) in every thread and takes them in one
** thread of its own, with sigwait or a signalfd, to stop the robot in
** order. The kernel hands a signal sent to the process to any thread that
** does not block it. Every thread the Go runtime creates takes its signal
** mask from the thread that started the runtime (runtime.initSigmask,
** saved in schedinit), and that thread is created as the library loads,
** usually before main has blocked anything: so the runtime's threads took
** SIGINT, whose default action ended the process (a Ctrl-C killed the
** host instead of reaching its sigwait, tests/c/sigmask.c).
**
** So the thread that starts the runtime (the first created here) is
** created with every signal blocked, and with it all the runtime's
** threads. Go unblocks on them what it needs: SIGURG (preemption) and
** the synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
** SIGSTKFLT), and also SIGCHLD, SIGPROF and signal 34 (runtime.blockableSig:
** _SigUnblock in its sigtable; 34 is musl's SIGSYNCCALL, and glibc's
** SIGRTMIN), which the library cannot keep blocked. Where no handler is
** installed, SIGPROF and SIGRTMIN end the process by default: plugrl.h
** says so. A caller's thread keeps its own mask but for that same
** set, which Go unblocks at the thread's first call. glibc's own signals
** (SIGCANCEL, SIGSETXID) are never blocked: sigfillset leaves them out.
*/
__attribute__((visibility("hidden"))) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                                         void *(*start)(void *), void *arg) {
  const int number = thread_number();
  sigset_t all, loader;
  const int masked = number == 0 && sigfillset(&all) == 0 && pthread_sigmask(SIG_SETMASK, &all, &loader) == 0;
  int err = create_thread(number, thread, attr, start, arg);
  if (masked) {
    pthread_sigmask(SIG_SETMASK, &loader, NULL);
  }
  if (err != 0) {
    thread_not_created(number);
  }
  return err;
}

/* ------------------------------------------------------------------------
** sysmon at the real-time caller's priority. Go 1.26's sysmon looks at a
** thread that is in a system call, or back in C between calls, by setting
** the scan bit of its goroutine for a moment (setBlockOnExitSyscall); the
** thread, returning to Go meanwhile, spins in exitsyscall until the bit
** is cleared. sysmon is SCHED_OTHER (see pthread_create above). On one
** core, a real-time caller woken in that moment (its action arrived)
** preempts sysmon and spins, and sysmon, below it, never runs again to
** clear the bit: the caller spun until the kernel's real-time throttling
** let sysmon run (0.95 s every second by default; never, with throttling
** off). Measured: one such stall every few seconds of a SCHED_FIFO client
** on one core, each 0.90-0.95 s.
**
** So sysmon runs at the highest real-time priority of the library's
** callers, SCHED_FIFO: a caller woken while sysmon holds the bit waits for
** it (microseconds: sysmon then sleeps again), as a priority ceiling
** wants. sysmon sleeps between its ticks, so at that priority it costs
** the caller's core a few microseconds per tick; it spins only on a
** goroutine a collection is scanning, which is why it is lowered for the
** library's own collections (the gate, below). (A
** SCHED_DEADLINE caller preempts any priority: it gets no ceiling, only
** the collector's care, runtime.go.) Each thread's policy is looked at on
** its first call and every 256th after, so a thread made real-time after
** it began calling is seen within 256 calls. The ceiling is raised,
** never lowered (sysmon leaves it only for the length of a collection);
** where raising it is not permitted, it is not tried again.
*/
static _Atomic int sysmon_priority; /* the ceiling set so far; -1: not permitted */
/* Set once a real-time thread has called in; runtime.go reads it (tameGC). */
static int rt_seen;
static pthread_mutex_t ceiling_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread unsigned ceiling_calls;

static int set_sysmon(int policy, int priority) {
  struct sched_param sp = {.sched_priority = priority};
  return pthread_setschedparam(sysmon_thread, policy, &sp);
}

void plugrl__rt_ceiling(void) {
  if ((ceiling_calls++ & 255) != 0) {
    return;
  }
  int policy;
  struct sched_param param;
  if (!realtime(&policy, &param)) {
    return;
  }
  /* Sequentially consistent: a first call's fitProcs (runtime.go) must see
  ** it before it decides to stop the world. */
  __atomic_store_n(&rt_seen, 1, __ATOMIC_SEQ_CST);
  if (!atomic_load(&sysmon_known)) {
    ceiling_calls = 0; /* look again at the next call */
    return;
  }
  if (policy != SCHED_FIFO && policy != SCHED_RR) {
    return; /* SCHED_DEADLINE: above every priority; no ceiling helps */
  }
  int cur = atomic_load(&sysmon_priority);
  if (cur < 0 || param.sched_priority <= cur) {
    return;
  }
  pthread_mutex_lock(&ceiling_mu);
  cur = atomic_load(&sysmon_priority);
  if (cur >= 0 && param.sched_priority > cur) {
    atomic_store(&sysmon_priority, set_sysmon(SCHED_FIFO, param.sched_priority) == 0 ? param.sched_priority : -1);
  }
  pthread_mutex_unlock(&ceiling_mu);
}

int *plugrl__rt_seen(void) { return &rt_seen; }

/* ------------------------------------------------------------------------
** The collection's gate. With real-time callers the library turns Go's
** automatic collection off (runtime.go) and collects after a close, on the
** closing thread. Go's collector scans every goroutine's stack, on the
** runtime's own threads (SCHED_OTHER), and a goroutine whose stack is
** being scanned cannot leave a system call or start running: its thread
** spins until the scan ends, yielding only to threads of its own priority.
** A real-time thread that spins so on the scanner's core, having preempted
** it, never lets it finish: it spins until the kernel's real-time
** throttling runs the scanner, about 1 s later (never, with throttling
** off). Measured: 16 SCHED_FIFO threads on one core opening and closing
** sessions stalled 0.95-2 s every few hundred sessions, the callers or
** sysmon (at their priority, plugrl__rt_ceiling) spinning.
**
** Raising the runtime's threads to the callers' priority for the length of
** the collection made it worse: the background sweeper yields by
** rescheduling its goroutine, never its thread, so at real-time priority
** it held the core while the callers it waited for could not run (a hang).
**
** So the library collects only when no other thread is in a call into it,
** and nobody calls in while it collects: a call that begins meanwhile
** waits here, asleep, before it enters Go, so no caller's goroutine can be
** scanned while it runs, and none can spin against the collector; sysmon
** is lowered to SCHED_OTHER for the collection, as no caller needs its
** ceiling then. A close that finds another thread inside (a loop waiting
** for its server) leaves the garbage to the next close that finds the
** library idle, or to the memory limit (runtime.go), whose collection is
** the one left that can meet a caller; a caller held at the gate waits
** for SCHED_OTHER work (the collector), so real-time load on its core
** stretches that wait. A thread's exit is bracketed too (exit_bracket,
** below).
**
** The counting is Dekker's: a caller counts itself in, then looks at the
** flag; the collector raises the flag, then looks at the count; with
** sequentially consistent atomics at least one of them sees the other.
*/
static _Atomic int inside;     /* calls into Go in progress, all threads */
static _Atomic int collecting; /* a collection after a close is running */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;

void plugrl__gate_enter(void) {
  for (;;) {
    atomic_fetch_add(&inside, 1);
    if (!atomic_load(&collecting)) {
      return;
    }
    atomic_fetch_sub(&inside, 1);
    /* No call into the library was ever a cancellation point (Go's
    ** system calls are not): a thread cancelled here would leave gate_mu
    ** locked and every later call waiting. */
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    pthread_mutex_lock(&gate_mu);
    while (atomic_load(&collecting)) {
      pthread_cond_wait(&gate_cv, &gate_mu);
    }
    pthread_mutex_unlock(&gate_mu);
    pthread_setcancelstate(cancel, NULL);
  }
}

void plugrl__gate_leave(void) { atomic_fetch_sub(&inside, 1); }

int plugrl__gate_inside(void) { return atomic_load(&inside); }

/* Threads that have called in and not exited: their number, a plain int,
** as Go reads it through a pointer (runtime.go, fitProcs), and their
** kernel thread ids, under bound_mu, for plugrl__bound_realtime: a tid,
** unlike a pthread_t, is safe to ask about after its thread is gone (one
** left behind by a thread whose destructor rounds ran out). Only tids of
** this process are asked about (tgkill with signal 0): a tid reused by
** another process's thread is skipped, and one reused by a thread of this
** process is asked about as that thread, which may call in. */
static int bound_threads;
static pthread_mutex_t bound_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t *bound_list;
static int bound_len, bound_cap;
static int bound_unlisted; /* bound threads the list could not take (no memory) */
static atomic_int bound_list_fails; /* plugrl__bound_list_fail */

void plugrl__bound_list_fail(int on) { atomic_store(&bound_list_fails, on); }

static void bound_add(pid_t tid) {
  pthread_mutex_lock(&bound_mu);
  int fail = atomic_load(&bound_list_fails);
  if (bound_len == bound_cap || fail) {
    int cap = bound_cap > 0 ? 2 * bound_cap : 64;
    pid_t *list = fail ? NULL : realloc(bound_list, (size_t)cap * sizeof *list);
    if (list == NULL) {
      bound_unlisted++;
      pthread_mutex_unlock(&bound_mu);
      return;
    }
    bound_list = list;
    bound_cap = cap;
  }
  bound_list[bound_len++] = tid;
  pthread_mutex_unlock(&bound_mu);
}

static void bound_remove(pid_t tid) {
  pthread_mutex_lock(&bound_mu);
  for (int i = 0; i < bound_len; i++) {
    if (bound_list[i] == tid) {
      bound_list[i] = bound_list[--bound_len];
      pthread_mutex_unlock(&bound_mu);
      return;
    }
  }
  if (bound_unlisted > 0) {
    bound_unlisted--; /* it was one the list could not take */
  }
  pthread_mutex_unlock(&bound_mu);
}

static pid_t this_tid(void) { return (pid_t)syscall(SYS_gettid); }

/* A thread that has called in and exits enters Go once more: the runtime's
** key destructor unbinds it (dropm), changing its goroutine's status, which
** spins while a collection scans that goroutine. So the exit is bracketed
** like a call: this key's destructor counts the thread in (waiting, if the
** library is collecting), stores a new value so that it runs again in the
** next round of destructors, after the runtime's, and then counts it out.
** In a forked child it does nothing: the child never enters Go, and a lock
** another thread held at the fork would never be released. */
static atomic_int exit_key_fails; /* plugrl__exit_key_fail */

void plugrl__exit_key_fail(int on) { atomic_store(&exit_key_fails, on); }

static int set_exit_state(void *state) {
  return atomic_load(&exit_key_fails) ? ENOMEM : pthread_setspecific(exit_key, state);
}

static void uncount_this_thread(void) {
  bound_remove(this_tid());
  __atomic_fetch_sub(&bound_threads, 1, __ATOMIC_SEQ_CST);
}

static void exit_bracket(void *state) {
  if (plugrl__forked) {
    return;
  }
  if (state == (void *)1) {
    /* Cancellation off for the rest of the exit: a thread that returned
    ** from its start function asynchronously cancellable, and was
    ** cancelled now, was unwound out of this destructor, between the
    ** gate's enter and leave, or out of the runtime's unbinding, which
    ** spun for ever. A cancel of a thread that has returned has nothing
    ** left to stop. */
    plugrl__cancellation_off(NULL, NULL);
    /* The second round is asked for before the gate is entered: a gate
    ** entered with no round to leave it would hold every later collection
    ** off for good. Without that round (a key beyond glibc's first 32 may
    ** need memory to store) the runtime's unbinding runs unbracketed. */
    if (set_exit_state((void *)2) != 0) {
      uncount_this_thread();
      watch_for_last_thread();
      return;
    }
    plugrl__gate_enter();
  } else if (state == (void *)2) {
    uncount_this_thread();
    plugrl__gate_leave();
    watch_for_last_thread();
  }
}

/* ------------------------------------------------------------------------
** The last thread. A process whose main thread ends with pthread_exit ends,
** POSIX says, when its last thread does, as if that thread called exit(0).
** The runtime's threads never end, so such a process ran on after its
** last thread of its own (the pattern the pthreads tutorials teach: main
** starts its workers and calls pthread_exit), a zombie that SIGTERM could
** not end either: the runtime's threads block the host's signals, and no
** thread of the host's was left to take one. Only SIGKILL ended it.
**
** So the runtime's threads are named (created, above), and once the main
** thread has exited, a thread of the library's own (exit_watch_name) looks
** every 100 ms for a live thread that is not one of the library's: when
** there is none, it calls exit(0), as the last thread's end would have.
** It starts when a thread that has called in exits after the main thread
** (or is the main thread): each such exit reads /proc/self/stat once. A
** thread the library did not name is the host's, whatever else it is, and
** without /proc nothing is ever taken for the last: the process runs on,
** as before. */
static atomic_int exit_watch_started;

/* A thread is taken for gone only when /proc says so: its entry is not
** there (ENOENT), or its task is (ESRCH: it exited after the open). Any
** other failure (no descriptor or memory left, EMFILE or ENOMEM, a
** sandbox refusing the read) says nothing about the thread, and leaves it
** counted as the host's: taken for gone, every thread of a host whose
** descriptors were all but used up was skipped, and the process was ended
** with its threads running. */
static int gone(int err) { return err == ENOENT || err == ESRCH; }

/* task_state is the state letter of the thread whose stat file is path
** ('R', 'S', 'Z', ...), 0 when the thread is gone, or '?' when it cannot
** be read (see gone). */
static char task_state(const char *path) {
  char buf[512];
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    return gone(errno) ? 0 : '?';
  }
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  int exited = n == 0 && ferror(f) && gone(errno);
  fclose(f);
  if (exited) {
    return 0;
  }
  buf[n] = 0;
  const char *paren = strrchr(buf, ')'); /* the name may hold one too */
  return paren != NULL && paren[1] == ' ' && paren[2] != 0 ? paren[2] : '?';
}

/* library_thread reports whether thread tid bears one of the names the
** library gives its threads, or is gone. */
static int library_thread(long tid) {
  char path[64], name[32] = "";
  snprintf(path, sizeof path, "/proc/self/task/%ld/comm", tid);
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    return gone(errno); /* gone since the directory was read, or the host's */
  }
  if (fgets(name, sizeof name, f) == NULL) {
    name[0] = 0;
  }
  fclose(f);
  name[strcspn(name, "\n")] = 0;
  return strcmp(name, runtime_thread_name) == 0 || strcmp(name, exit_watch_name) == 0;
}

/* thread_count is the kernel's count of the process's threads (the
** Threads line of /proc/self/status; an exited main thread that waits for
** the others counts), or -1 when it cannot be read. */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (f == NULL) {
    return -1;
  }
  char line[128];
  int n = -1;
  while (n < 0 && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Threads:", 8) == 0) {
      n = atoi(line + 8);
    }
  }
  fclose(f);
  return n;
}

/* only_library_threads reports whether every live thread of the process
** is one of the library's: 0 when one is not, or /proc cannot tell (a
** directory that cannot be read to its end included). */
static int only_library_threads(void) {
  /* The listing must hold every thread the kernel counts, before and
  ** after it: a thread skipped by the listing (see exit_watch) leaves it
  ** short of the count, since the skip needs a thread to exit meanwhile,
  ** which changes the count. */
  int before = thread_count();
  if (before <= 0) {
    return 0;
  }
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) {
    return 0;
  }
  int host = 0, seen = 0;
  while (!host) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (e == NULL) {
      host = errno != 0; /* not the end: the rest is unknown */
      break;
    }
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (e->d_name[0] == '.' || *end != 0) {
      continue;
    }
    seen++;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    char state = task_state(path);
    if (state == 'Z' || state == 'X' || state == 0) {
      continue; /* the exited main thread, or one gone meanwhile */
    }
    host = !library_thread(tid);
  }
  closedir(d);
  return seen > 0 && !host && seen == before && thread_count() == before;
}

static void *exit_watch(void *arg) {
  (void)arg;
  /* Named by itself, before its first look (the only one that counts
  ** it): pthread_setname_np on another thread needs a descriptor, and
  ** unnamed it would count as the host's for ever. */
  prctl(PR_SET_NAME, exit_watch_name, 0, 0, 0);
  for (;;) {
    struct timespec tick = {0, 100 * 1000 * 1000};
    nanosleep(&tick, NULL);
    /* Twice, each listing checked against the kernel's thread count
    ** (only_library_threads): the kernel's listing of /proc/self/task can
    ** skip a live thread when the one before it exits while it is listed
    ** (fs/proc/base.c, proc_task_readdir: next_tid ends the batch at a
    ** task that died, and first_tid resumes by position). Under thread
    ** churn one listing missed a live thread 222 times in 2 million, two
    ** in a row never (a review's scratch test, before the count check). */
    if (only_library_threads() && only_library_threads()) {
      exit(0);
    }
  }
  return NULL;
}

static void start_exit_watch(void) {
  if (this_tid() != getpid() && task_state("/proc/self/stat") != 'Z') {
    return; /* the main thread runs: the process ends when it does */
  }
  if (atomic_exchange(&exit_watch_started, 1)) {
    return;
  }
  pthread_create_fn create = real_pthread_create();
  pthread_attr_t attr;
  sigset_t all, old;
  pthread_t t;
  int err = create == NULL || pthread_attr_init(&attr) != 0;
  if (!err) {
    /* Detached, SCHED_OTHER (a real-time thread's exit must not make a
    ** real-time poller), with every signal blocked: never the host's. */
    struct sched_param normal = {0};
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
    pthread_attr_setschedparam(&attr, &normal);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = create(&t, &attr, exit_watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err == 0) {
      /* On the runtime's CPUs, not the exiting thread's (an isolated
      ** real-time core, maybe: see runtime_cpus); it sleeps 100 ms before
      ** its first look, and a mask refused leaves it where it is. */
      cpu_set_t cpus;
      if (runtime_cpus(&cpus)) {
        pthread_setaffinity_np(t, sizeof cpus, &cpus);
      }
    }
  }
  if (err != 0) {
    atomic_store(&exit_watch_started, 0); /* the next thread's exit tries again */
  }
}

/* watch_for_last_thread runs in a key's destructor, where a thread that
** returned from its start function with a cancel pending (one that came
** during its last call, which acts after it: exports.c) is cancelled at
** the first cancellation point: the read of /proc/self/stat. It left
** without starting the watcher, and the process ran on after its last
** thread. So cancellation is off meanwhile. */
static void watch_for_last_thread(void) {
  int cancel;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
  start_exit_watch();
  pthread_setcancelstate(cancel, NULL);
}

void plugrl__gate_bind_thread(void) {
  if (set_exit_state((void *)1) != 0) {
    return; /* no exit bracket, so not counted: its exit could not uncount it */
  }
  bound_add(this_tid());
  __atomic_fetch_add(&bound_threads, 1, __ATOMIC_SEQ_CST);
}

int *plugrl__bound_threads(void) { return &bound_threads; }

/* plugrl__bound_realtime asks the kernel the policy of every bound thread
** now: 1, and rt_seen raised, if one is real-time (or SCHED_DEADLINE); 2 if
** a bound thread could not be listed (unknown: the caller's change waits
** for the gate, and rt_seen, which would turn automatic collection off for
** good, stays as it is); 0 otherwise. plugrl__rt_ceiling looks at a
** thread's policy only at its first call and every 256th after, so a
** thread made real-time after it began calling (set up first, then go
** real-time: a common order), by itself or from outside (`chrt -p`), is
** not seen by it for up to 255 calls; before the library stops the world
** without the gate, it must know (runtime.go, fitProcs). */
int plugrl__bound_realtime(void) {
  int rt = 0;
  pthread_mutex_lock(&bound_mu);
  int unknown = bound_unlisted > 0;
  pid_t pid = getpid();
  for (int i = 0; i < bound_len && !rt; i++) {
    int policy;
    rt = syscall(SYS_tgkill, pid, bound_list[i], 0) == 0 && realtime_policy(bound_list[i], &policy);
  }
  pthread_mutex_unlock(&bound_mu);
  if (rt) {
    __atomic_store_n(&rt_seen, 1, __ATOMIC_SEQ_CST);
    return 1;
  }
  return unknown ? 2 : 0;
}

int plugrl__collect_begin(void) {
  pthread_mutex_lock(&gate_mu);
  int alone = 0;
  if (!atomic_load(&collecting)) {
    atomic_store(&collecting, 1);
    alone = atomic_load(&inside) == 1; /* the closing thread's own call */
    if (!alone) {
      atomic_store(&collecting, 0);
      pthread_cond_broadcast(&gate_cv);
    }
  }
  pthread_mutex_unlock(&gate_mu);
  if (alone) {
    pthread_mutex_lock(&ceiling_mu);
    if (atomic_load(&sysmon_priority) > 0) {
      (void)set_sysmon(SCHED_OTHER, 0);
    }
    pthread_mutex_unlock(&ceiling_mu);
  }
  return alone;
}

void plugrl__collect_end(void) {
  pthread_mutex_lock(&ceiling_mu);
  int priority = atomic_load(&sysmon_priority);
  if (priority > 0 && set_sysmon(SCHED_FIFO, priority) != 0) {
    /* No longer permitted (the process dropped the capability): say so,
    ** as plugrl__rt_ceiling does, rather than claim a ceiling. */
    atomic_store(&sysmon_priority, -1);
  }
  pthread_mutex_unlock(&ceiling_mu);
  pthread_mutex_lock(&gate_mu);
  atomic_store(&collecting, 0);
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}
