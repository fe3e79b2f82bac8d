/*
** plugrl.h - the C interface of libplugrl, a PlugRL env client.
**
** libplugrl lets a native program (a robot controller, a ROS 2 node, a Rust
** program) be an env client of a PlugRL training server: it speaks the wire
** protocol of SPEC.md version 1 (WebSocket + msgpack + numpy arrays) so the
** program does not need a msgpack or WebSocket library of its own.
**
** Two levels:
**
**   - The RUNNER (plugrl_runner_*) steps N local envs in lockstep: give it
**     every env's observation, get every env's action for this step, report
**     rewards and done flags. Chunking, reward sums, terminal observations,
**     episode statistics, observation reuse and reconnects are its job.
**     Most programs should use it.
**   - The LOW LEVEL (plugrl_infer / plugrl_feedback) sends the protocol's
**     messages directly, for programs that do their own chunk bookkeeping.
**
** CONVENTIONS, which hold for every function below unless it says otherwise:
**
**   Status.   Every function returns a plugrl_status; PLUGRL_OK is 0. On
**             any other status, plugrl_errmsg() (or plugrl_runner_errmsg())
**             says in words what was wrong and what was expected. A caller
**             error (PLUGRL_INVALID_ARGUMENT, PLUGRL_OUT_OF_ORDER) is found
**             before anything is sent: the connection is unchanged (but
**             for memory that faults, under Memory below).
**   Results.  A function that gives its results through the caller's
**             pointers (present, length, value, yes, known, step_size,
**             steps, plugrl_runner_new's runner, plugrl_infer's action:
**             all its fields) sets each that is not NULL to 0 (NULL)
**             first, before anything can fail: whatever the
**             status, such a pointer holds the result or 0, never what the
**             caller left there (PLUGRL_BUFFER_TOO_SMALL sets the length
**             or steps that was needed). Not in a forked child (PROCESS
**             FACTS), where nothing is written; plugrl_open's client and
**             plugrl_stats' out say what they hold themselves.
**   Handles.  plugrl_client and plugrl_runner are opaque. A handle is a
**             token the library looks up, never an address it reads: a
**             NULL, closed or made-up handle gets PLUGRL_CLOSED, never a
**             crash, and a closed handle's value is never reused. Each
**             process numbers its handles from a random start, so that a
**             handle's value from another process (shared memory, a file
**             read back after a restart) is a made-up one here too.
**   Memory.   Every pointer the library returns points to memory the
**             library owns (C memory, never Go memory) and stays valid
**             until the next call on the same handle, unless stated
**             otherwise. Pointers the caller passes in are read during the
**             call only and never kept. A pointer is NULL or a real address,
**             also where its count is 0: not a small made-up value such as
**             Rust's dangling pointer of an empty slice (0x1, 0x8), which
**             the Go runtime inside may take for a corrupt pointer, and
**             abort (when it moves a stack that holds a copy of it).
**             A pointer to memory the process cannot read or write (a
**             camera buffer unmapped, an array freed back to the system, a
**             GPU's device pointer) is PLUGRL_INVALID_ARGUMENT, not a
**             crash: the message names the address that faulted. A fault
**             while the call sends or steps (an array's data, the ids, or
**             plugrl_feedback's rewards and episode values, read by
**             plugrl_infer or plugrl_feedback; plugrl_runner_act's
**             observation or actions, plugrl_runner_report's observation)
**             drops the connection, since part of a message may have been
**             sent (the next call reconnects; SPEC 7.6 drops what was owed
**             on it). Any other fault changed nothing, and the call may be
**             made again with good memory: in the getters (metadata,
**             plugrl_action_copy, plugrl_can_reuse, plugrl_runner_chunk,
**             plugrl_runner_step_size, the stats) and in what a call reads
**             before it begins (the observation's names, shapes and texts,
**             flags, plugrl_runner_report's rewards). A pointer into the first
**             page (NULL plus an offset) faults as the library's own nil
**             dereference would, and is PLUGRL_INTERNAL; a message it broke
**             off is dropped with its connection all the same. Memory that
**             is mapped but not what the caller meant (freed to malloc, the
**             wrong array) is read as it is: nothing can tell. A SIGSEGV
**             handler the program installed after the library loaded (a
**             crash reporter's) takes such a fault first (PROCESS FACTS).
**   Arrays.   Arrays in and out are C-contiguous (row-major), in the host's
**             byte order.
**   Blocking. Calls that talk to the server block the calling thread up to
**             the deadlines in plugrl_options, as each function says,
**             whatever the server does; none blocks forever.
**             plugrl_interrupt() ends a blocked call at once, from any
**             thread or from a signal handler.
**   Limits.   Memory and work follow the bytes actually received and the
**             limits in plugrl_options, never a size or shape a server
**             claims: a message over the size cap, or a shape its bytes
**             cannot hold, is PLUGRL_PROTOCOL_ERROR; memory that cannot be
**             had is PLUGRL_NO_MEMORY, never an abort.
**   Threads.  One handle serves one thread at a time. A second thread that
**             calls into a handle while a call on it is running gets
**             PLUGRL_BUSY (nothing happens). The exceptions are
**             plugrl_interrupt, plugrl_runner_interrupt, plugrl_close and
**             plugrl_runner_free, which any thread may call at any time:
**             close and free interrupt a running call and wait for it to
**             return; and plugrl_errmsg, plugrl_runner_errmsg, plugrl_stats
**             and plugrl_runner_stats, which read without waiting for the
**             running call (each says what it gives meanwhile). Different
**             handles may be used from different threads at the same time.
**   Cancel.   No call is a cancellation point, and none can be cancelled
**             asynchronously: each turns the thread's cancellation off,
**             and its type deferred, while it runs (also while it runs a
**             log or episode callback, whose own cancellation points then
**             do not act) and puts both back as it returns. A
**             pthread_cancel that comes meanwhile acts at the thread's
**             first cancellation point after the call (an asynchronous
**             one, as the call returns, before the caller sees its
**             status; or, sent just before, as it begins, before it has
**             done anything); pthread_join then gives PTHREAD_CANCELED,
**             as for any cancel. To end a call that waits, interrupt it
**             (plugrl_interrupt) or close its handle from another thread.
**   Signals.  A signal handler may call plugrl_interrupt,
**             plugrl_interrupt_all and plugrl_runner_interrupt (to end
**             calls), and plugrl_status_str, plugrl_version,
**             plugrl_version_number and plugrl_dtype_size (static answers,
**             in C): these are async-signal-safe, on any thread, also one
**             the signal caught inside a call. No other function is: each
**             enters the Go runtime, and from a handler that caught its
**             thread in the library's Go code it ends the process (the
**             runtime's "fatal error") or hangs it; plugrl_errmsg,
**             plugrl_stats and plugrl_close too. Keep the status in the
**             handler and read plugrl_errmsg once the call has returned.
**
** PROCESS FACTS (the library contains the Go runtime):
**
**   - One Go runtime per process: link libplugrl once; do not load two
**     copies of it under different names, nor any other library built
**     from Go (-buildmode=c-shared or c-archive), and do not load it into
**     a Go program through cgo: Go does not support two runtimes in one
**     process.
**   - libplugrl is never unloaded: the Go runtime cannot be, so Go links
**     it NODELETE and dlclose() leaves it loaded, with its threads and any
**     handle still open, until the process exits. A plugin that links it
**     (a controller, a component, a simulator's plugin) may be loaded
**     late, unloaded and loaded again. Close the plugin's handles before
**     unloading it: one left open can no longer be reached, though it is
**     harmless (its connection is answered and then ended by its server;
**     the library calls a log or episode callback only during a call on
**     its handle, so it never calls into the unloaded plugin).
**     Loaded late, it needs room in glibc's static TLS: a library built
**     by Go uses the initial-exec TLS model (libplugrl's segment is 28
**     bytes), which dlopen() takes from the small surplus glibc reserves
**     at start. Once libraries dlopen()ed before it have used that up
**     (ones with large initial-exec TLS: OpenMP runtimes, allocators),
**     dlopen() of the plugin fails with "cannot allocate memory in static
**     TLS block" (measured on glibc 2.36, x86-64: after two libraries of
**     1600 and 100 bytes of such TLS). Then link libplugrl into the
**     program, or LD_PRELOAD it, so that it is loaded at start, or raise
**     the surplus (GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4096).
**   - Do not fork() without exec() after the library is loaded and has
**     started its threads; the child would have a broken Go runtime. In
**     such a child every handle is dead (PLUGRL_CLOSED, the parent's
**     connections are left alone), plugrl_open and plugrl_options_init
**     return PLUGRL_CLOSED, plugrl_status_str returns a sentence saying
**     why for every status, and plugrl_version, plugrl_version_number and
**     plugrl_dtype_size still answer: nothing enters the Go runtime. A
**     program that links the library and detaches with daemon(3) is such
**     a child: it execs itself again after detaching, or dlopen()s the
**     library after it (README "What every user must know").
**   - Real-time callers: a thread under SCHED_FIFO or SCHED_RR may call in.
**     The runtime's own threads (which it creates from whichever thread
**     needs one) are always created SCHED_OTHER, so nothing of the
**     library's can starve the caller on its core, with one exception:
**     the runtime's monitor thread (sysmon) runs SCHED_FIFO at the highest
**     priority of the real-time threads that have called in, because it
**     briefly blocks a thread's return into Go, and a caller preempting it
**     there would spin until it ran again (a 0.95 s stall, or a hang with
**     real-time throttling off). It sleeps between ticks of 20 us to
**     10 ms and works a few microseconds in each. Once a real-time thread
**     has called in, the garbage collector, whose stack scans block a
**     thread the same way, no longer runs on its own. plugrl_close and
**     plugrl_runner_free collect on the closing thread (about a
**     millisecond) when no other thread is in a call into the library,
**     and a call that begins meanwhile (or a thread that has called in
**     and exits) waits for the collection to end, asleep, before it
**     enters Go: such a collection never meets a real-time caller (one
**     that did spun a caller for 1-2 s, 16 SCHED_FIFO threads opening and
**     closing sessions on one core). The wait is for the collector's
**     SCHED_OTHER threads, so other real-time work on their core
**     lengthens it. A close that finds another thread in a call (a loop
**     waiting for its server) leaves its garbage (tens of KiB) to a later
**     one; a memory limit 256 MiB above the memory in use after the last
**     collection is the backstop, and the one collection that can still
**     meet a caller. GOGC or GOMEMLIMIT set in the environment leave the
**     collector to the user.
**   - A thread's first call into the library (but for
**     plugrl_fix_signal_handlers and the seven functions of CONVENTIONS,
**     Signals, which never enter Go) binds it to one of the Go runtime's
**     threads, and such first calls are made one at a time (a
**     few microseconds each): many threads starting at once queue for it
**     asleep, instead of spinning, which starved 64 real-time threads
**     opening clients together on one core. It also gives the runtime a
**     scheduler slot (P) for the thread, up to 80 threads (more share 17
**     slots; a thread counts from its first call until it exits), so that
**     threads waiting for their servers do not keep one whose server
**     answered from running; that stops the runtime's threads for a
**     moment (7 us typical with 17 slots, 12 us with 65, 50 us p99 on a
**     2-core machine). Not once a real-time thread has called in or a
**     thread that has runs real-time: the slots then change only while no
**     other thread is in a call. GOMAXPROCS set in the environment turns
**     this off.
**   - Signal handlers must run with SA_ONSTACK, or a signal landing on a
**     thread while it runs the library's Go code can crash the process
**     (the handler would run on a small goroutine stack, past its end: a
**     SIGPROF profiler's, gperftools' or gprof's, corrupted the Go heap).
**     The Go runtime adds SA_ONSTACK at load to the handlers installed
**     before it (all but SIGCONT's, SIGTSTP's, SIGTTIN's and SIGTTOU's),
**     and each thread's first call into the library and every
**     plugrl_open (once its options are accepted, before it connects) add
**     it to every handler installed by then (rclcpp's, a profiler's
**     started before it); a program that installs
**     one lacking it after its first open calls
**     plugrl_fix_signal_handlers() after installing it. Handlers should
**     use less than 16 KiB of stack: the Go runtime's signal stacks are
**     32 KiB. A thread may install its own larger sigaltstack before its
**     first call into the library, and the runtime then uses that one.
**     The change is process-wide: once a handler has SA_ONSTACK, it runs
**     on the sigaltstack of every thread that has one, also a thread that
**     never calls in and whose own stack is small (Rust's std gives each
**     of its threads 8 KiB, for its SIGSEGV handler). A SIGPROF handler
**     using 12 KiB, installed after load without SA_ONSTACK, ran on such
**     a thread's stack until plugrl_open and crashed the process
**     (SIGSEGV) after it: a handler must fit the smallest sigaltstack in
**     the process.
**     A handler for SIGSEGV, SIGBUS or SIGFPE installed after the library
**     loaded (a crash reporter's) takes those faults from the runtime.
**     Nothing in the library faults in normal operation (20 sessions of
**     500 steps with such handlers installed reached none), but a fault
**     in its own code, a bug it would report as PLUGRL_INTERNAL, then
**     reaches that handler instead.
**   - Signal handlers must return. A handler that leaves with siglongjmp
**     (a watchdog's timeout, say) on a thread that is inside a call
**     abandons the library's frames there, as an asynchronous cancel
**     once did (Cancel, above): the call never finishes, its handle stays
**     busy, and plugrl_close of it waits for ever. Bound a call with its
**     own timeouts or end it with plugrl_interrupt (async-signal-safe)
**     instead, or block that signal on the thread around its calls.
**   - Signals blocked in every thread stay blocked: a host that takes
**     SIGINT, SIGTERM and the like in a thread of its own (sigwait, a
**     signalfd) gets them there: the runtime's threads block every
**     signal, whatever the mask of the thread that loaded the library was
**     (which is usually main's, before it blocked anything). Go unblocks
**     a few on every thread it runs on, a caller's included from its first
**     call: SIGURG (it preempts with it), the faults (SIGSEGV, SIGBUS,
**     SIGFPE, SIGILL, SIGTRAP, SIGSTKFLT), SIGPROF, SIGCHLD and signal 34,
**     which is glibc's SIGRTMIN (Go keeps it for musl's own use). So a
**     SIGCHLD sent to the process can land on any thread and be lost to a
**     sigwait (its default action is to ignore it): learn of children's
**     ends with waitpid, a pidfd or a SIGCHLD handler instead. A SIGRTMIN
**     or a SIGPROF sent to the process (a POSIX timer's signal, say) can
**     land on a runtime thread, where no handler takes it, and its default
**     action ends the process: give sigwait SIGRTMIN + 1 or a later one.
**   - Threads: the Go runtime makes threads of its own as it needs them
**     and never ends an idle one (5 with one calling thread, 6 with 8, 19
**     with 64, on 2 CPUs; 155-160 after a day of real-time callers coming
**     and going on one core, README "Real-time callers"), and a
**     runtime that cannot make one aborts the process ("runtime/cgo:
**     pthread_create failed"; 4 of 4 runs of a user with no other tasks
**     under RLIMIT_NPROC of 5 or less, which counts all of that user's
**     tasks and does not bind root). Leave room for them under a thread
**     limit (ulimit -u, a container's pids.max).
**   - File descriptors: the first plugrl_open takes three for the life
**     of the process (the Go runtime's network poller, an epoll instance
**     and an eventfd; and the eventfd plugrl_interrupt writes to), all
**     close-on-exec, and each connection one more. Never close descriptors
**     the program did not open (a daemon's close-everything loop belongs
**     before the first open). If stdin, stdout or stderr is non-blocking
**     (O_NONBLOCK) when the library loads, Go's os package registers it
**     with the poller then, and the poller's two descriptors are taken at
**     load, not at the first open: such a loop must then come before the
**     library is loaded (dlopen it after). The runtime also holds one or
**     two from load in a CPU cgroup (its CPU-limit files: cgroup v2's
**     cpu.max, v1's cpu.cfs_quota_us and cpu.cfs_period_us), which it
**     rereads with pread: closing them takes away only its view of a
**     container's CPU limit. A process out of descriptors gets
**     PLUGRL_CONNECT_FAILED from plugrl_open, with a message saying so.
**   - Valgrind's Memcheck cannot follow the Go runtime's stacks, nor
**     Helgrind and DRD its synchronisation, and each reports errors from
**     inside the library in any program that links it: give them
**     --suppressions=PREFIX/share/plugrl/valgrind.supp (pkg-config
**     variable valgrind_suppressions; CMake plugrl_VALGRIND_SUPPRESSIONS),
**     which hides the errors whose innermost frame is in libplugrl (and
**     with them the program's own that are reported there: README "Checking
**     a host with Valgrind"), and run them with
**     GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0.
**   - mlockall() needs RLIMIT_MEMLOCK unlimited (or CAP_IPC_LOCK): the
**     runtime maps about 2 GB of address space, nearly all of it never
**     touched, and the kernel counts it all against that limit. Under a
**     smaller limit, mlockall(MCL_CURRENT) fails with ENOMEM, and after
**     MCL_FUTURE the first mapping the runtime cannot lock (its start, a
**     new thread's stack, more heap) ends the process inside the runtime,
**     sooner or later. Locked, each runtime thread's whole
**     stack (ulimit -s) is resident too: the bench client held 150-180 MB
**     with 8 MiB stacks, 105 MB with 1 MiB ones, against 10 MB unlocked
**     (README "Real-time callers").
**   - The caller's stack: a call runs the library on the Go runtime's own
**     stacks; of the calling thread's it used at most 4.5 KiB in every
**     measurement (at a thread's first call; 1.5-3 KiB after), a figure
**     measured, not a bound. Calls may be made from coroutines
**     (ucontext, boost.context, minicoro, a behaviour tree's), several on
**     one thread, a thread's first call from one too, and the coroutine
**     may be switched out between calls (never during one: a call blocks
**     its thread) and resumed on another thread (an executor's pool).
**     Give such a stack 32 KiB free at the call,
**     which is what the Go runtime assumes of a stack it did not make:
**     its own code that runs there is not checked against a smaller one.
**     CTest coroutine: 64 KiB stacks with a guard page, the most used
**     measured every run.
**   - An address-space limit (RLIMIT_AS, ulimit -v) must leave the Go
**     runtime about 0.8 GiB, which it reserves at load and never touches,
**     plus a stack of ulimit -s for each thread it starts: under less the
**     process ends inside the runtime, as it starts at load (in a thread
**     of its own, while main runs; at the first call at the latest) or
**     when it next needs a thread. A memory cgroup (memory.max) limits
**     what is resident instead (README "What every user must know").
**   - The runtime's threads are named plugrl-go, and never end. So that a
**     program whose main thread ends with pthread_exit still ends when its
**     last thread does, with status 0, as POSIX says, a thread of the
**     library's (plugrl-exit) starts once the main thread has exited
**     (when it loaded the library, or a thread that called in exits after
**     it), looks every 100 ms for a live thread not named by the library,
**     and calls exit(0) when none is left (the program's atexit handlers
**     run on it). It needs /proc: without it
**     such a process runs on after its last thread, and only SIGKILL ends
**     it (the runtime's threads block the host's signals).
**   - A limit on threads (pids.max, TasksMax=, RLIMIT_NPROC) must leave
**     room for the runtime's: 5-6 for a process with one calling thread,
**     about one more per calling thread, up to GOMAXPROCS and a few. Where
**     it cannot create one, the runtime ends the process.
*/
#ifndef PLUGRL_H
#define PLUGRL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
** Version of this header. plugrl_version_number() returns the library's;
** a program can compare the two to detect a header/library mismatch.
** PLUGRL_VERSION_NUMBER is MAJOR*1000000 + MINOR*1000 + PATCH.
*/
#define PLUGRL_VERSION_MAJOR 0
#define PLUGRL_VERSION_MINOR 2
#define PLUGRL_VERSION_PATCH 0
#define PLUGRL_VERSION_STRING "0.2.0"
#define PLUGRL_VERSION_NUMBER 2000

/* The library's version string, e.g. "0.2.0". Static; never NULL.
** Async-signal-safe (CONVENTIONS, Signals). */
const char *plugrl_version(void);

/* The library's PLUGRL_VERSION_NUMBER. Async-signal-safe. */
int plugrl_version_number(void);

/*
** Status codes. Every function returns one.
*/
typedef enum plugrl_status {
  PLUGRL_OK = 0,
  /* The server ended the run (close reason plugrl-server-stop). Exit; do
  ** not reconnect. Every later call that would talk to the server
  ** (plugrl_infer, plugrl_feedback, plugrl_runner_act and _report) returns
  ** this again, after the checks of its arguments' form (NULLs, counts,
  ** dtypes, ndim and dimensions; and every check of the runner's); an
  ** infer or feedback that a live connection would refuse for its order,
  ** its env indices (negative, repeated, holding a chunk or not) or its
  ** rows (an array's leading dimension, reuse) gets this too, not
  ** PLUGRL_INVALID_ARGUMENT or PLUGRL_OUT_OF_ORDER. What the client
  ** already holds (metadata, statistics) can still be read. */
  PLUGRL_STOPPED = 1,
  /* The connection was lost or resynced and the library reconnected. Any
  ** feedback owed was dropped, never sent (SPEC 7.6). Start again with an
  ** infer (the runner does this by itself and never returns this: when
  ** the connection ends during each of 4 infers in a row, its act returns
  ** PLUGRL_CONNECT_FAILED; when a report's feedback is dropped with a
  ** connection that is the fourth or later in a row, in its acts and
  ** reports, to end before a feedback goes through, that report returns
  ** PLUGRL_CONNECT_FAILED (see plugrl_runner_report); the reconnect a
  ** runner's first act makes to give up feedback an earlier user left
  ** owed is not one of them). */
  PLUGRL_RECONNECTED = 2,
  /* A deadline from plugrl_options passed. After a timeout waiting for an
  ** action the connection is closed; the next infer reconnects. */
  PLUGRL_TIMEOUT = 3,
  /* The server failed: close code 1011, or a text frame (SPEC 7.4). Not
  ** 1011 with the reason "keepalive ping timeout": Python websockets'
  ** drop of a client that left its pings unanswered (stopped in a
  ** debugger, say) is a lost connection, PLUGRL_RECONNECTED. */
  PLUGRL_SERVER_ERROR = 4,
  /* The server sent a malformed or inconsistent message, or a message out
  ** of turn (a second reply to one infer, if it is there when the client
  ** looks before the next feedback; see README). The connection is closed;
  ** the next infer reconnects. */
  PLUGRL_PROTOCOL_ERROR = 5,
  /* An argument was NULL, of the wrong shape or dtype, or inconsistent. */
  PLUGRL_INVALID_ARGUMENT = 6,
  /* A call in the wrong order, e.g. infer while a feedback is owed. */
  PLUGRL_OUT_OF_ORDER = 7,
  /* Could not connect, after every allowed attempt; or, from
  ** plugrl_runner_act, the connection ended during each of 4 infers in a
  ** row (the server, or a proxy, ends every connection). */
  PLUGRL_CONNECT_FAILED = 8,
  /* The handle is NULL, closed, being closed (plugrl_close or
  ** plugrl_runner_free has begun), or not a handle. */
  PLUGRL_CLOSED = 9,
  /* Another thread is inside a call on this handle. */
  PLUGRL_BUSY = 10,
  /* A caller buffer is too small; the needed size was reported. */
  PLUGRL_BUFFER_TOO_SMALL = 11,
  /* Out of memory. */
  PLUGRL_NO_MEMORY = 12,
  /* A bug in the library; the message says where. Please report it. */
  PLUGRL_INTERNAL = 13,
  /* plugrl_interrupt() ended the call, or found no call running and ended
  ** the next plugrl_infer or plugrl_runner_act before it sent anything
  ** (the connection is then unchanged, unless the interrupt landed just as
  ** the call before completed: then it had ended the connection, and the
  ** next call reconnects). One interrupt ends at most one call. A call
  ** interrupted while it waited on the server drops the connection, since
  ** the stream may be in the middle of a message (when the request went out
  ** whole, the server is first sent a close frame, 1000; an interrupt that
  ** lands while the call is still writing waits up to 0.3 ms for the write
  ** to end whole, and a longer one, to a server that stops reading, ends
  ** the connection without one): feedback owed on
  ** it is never sent (SPEC 7.6), and the next infer reconnects and returns
  ** PLUGRL_RECONNECTED (the runner rides through that by itself). */
  PLUGRL_INTERRUPTED = 14
} plugrl_status;

/* A static English name for a status, e.g. "stopped by server". Never NULL;
** an unknown value gives "unknown status" (in a forked child, see PROCESS
** FACTS, a sentence saying the library cannot be used there). Thread-safe
** and async-signal-safe (CONVENTIONS, Signals). */
const char *plugrl_status_str(plugrl_status status);

/*
** Element types, with their numpy typestr (SPEC 3.3) in host byte order.
*/
typedef enum plugrl_dtype {
  PLUGRL_DTYPE_BOOL = 1, /* |b1, one byte holding 0 or 1 */
  PLUGRL_DTYPE_U8 = 2,   /* |u1 */
  PLUGRL_DTYPE_U16 = 3,  /* <u2 */
  PLUGRL_DTYPE_U32 = 4,  /* <u4 */
  PLUGRL_DTYPE_U64 = 5,  /* <u8 */
  PLUGRL_DTYPE_I8 = 6,   /* |i1 */
  PLUGRL_DTYPE_I16 = 7,  /* <i2 */
  PLUGRL_DTYPE_I32 = 8,  /* <i4 */
  PLUGRL_DTYPE_I64 = 9,  /* <i8 */
  PLUGRL_DTYPE_F16 = 10, /* <f2, IEEE half precision as uint16_t bits */
  PLUGRL_DTYPE_F32 = 11, /* <f4 */
  PLUGRL_DTYPE_F64 = 12  /* <f8 */
} plugrl_dtype;

/* Bytes per element of dtype, or 0 for an unknown value. Async-signal-safe. */
size_t plugrl_dtype_size(plugrl_dtype dtype);

/* The largest ndim an array may have. */
#define PLUGRL_MAX_DIMS 32

/*
** A named array of an observation: `name` (UTF-8, NUL-terminated), `ndim`
** dimensions in `shape`, and prod(shape) elements of `dtype` at `data`.
** The leading dimension is the number of envs in the batch. Images must be
** PLUGRL_DTYPE_U8 with shape [n, height, width, channels]; states may be
** any numeric dtype with shape [n, ...] (float64 is the convention).
** The library reads the memory during the call only.
*/
typedef struct plugrl_array {
  const char *name;
  const void *data;
  plugrl_dtype dtype;
  int32_t ndim;
  const int64_t *shape;
} plugrl_array;

/*
** One batch of observations (SPEC 5.2): images and states, each an array of
** named arrays (either may be empty: count 0, pointer may be NULL), and
** text: `text` is NULL (empty strings are sent) or holds one NUL-terminated
** UTF-8 string per row of the arrays (per env, or per env not reused; text
** or an array name that is not valid UTF-8 is PLUGRL_INVALID_ARGUMENT),
** read only after the arrays' leading dimension is found to be at most the
** call's envs (its n or m, or the runner's num_envs); text needs at least
** one array. Text is sent in numpy's <U form, as the Python env
** client does, unless text_as_strings is nonzero (a msgpack string array).
*/
typedef struct plugrl_observation {
  const plugrl_array *images;
  size_t num_images;
  const plugrl_array *states;
  size_t num_states;
  const char *const *text;
  int32_t text_as_strings;
} plugrl_observation;

/* Log levels passed to a plugrl_log_fn. */
#define PLUGRL_LOG_DEBUG 0
#define PLUGRL_LOG_INFO 1
#define PLUGRL_LOG_WARN 2
#define PLUGRL_LOG_ERROR 3

/*
** A log callback: the library says what it did on its own (reconnects,
** dropped feedback). It is called on the thread of the library call that
** caused it, during that call; `message` is valid only during the callback.
** It must not call into the library: a call on the client (or a runner on
** it) returns PLUGRL_BUSY there, plugrl_close and plugrl_runner_free
** included, which would otherwise wait for ever for the call the callback
** is inside of (plugrl_interrupt excepted). It must return: leaving it
** with longjmp, a C++ exception or pthread_exit would unwind through the
** library's frames and leave the call, and its handle, unfinished. It
** runs with the thread's cancellation off (Cancel, above), and must not
** turn it on where a cancel may then act (an asynchronous type, a
** cancellation point): that too would unwind through the library's
** frames. A change it leaves is undone as it returns.
*/
typedef void (*plugrl_log_fn)(void *user, int level, const char *message);

/*
** Options for plugrl_open. Always fill it with plugrl_options_init first,
** then set what you need: `size` lets a library accept the struct of an
** older or a newer header (see plugrl_options_init). New fields are only
** ever added at the end. Strings are copied during plugrl_open. A zero in any
** numeric field means its default; a negative value is refused
** (PLUGRL_INVALID_ARGUMENT, naming the field) but for the -1 that
** max_reconnects, max_message_size, dead_peer_timeout_ms and open_wait_ms
** document.
*/
typedef struct plugrl_options {
  size_t size;                 /* sizeof(plugrl_options); set by _init */
  const char *url;             /* "ws://host:port" or "wss://host:port"; required. host is a
                                  name or an IP address ([::1] for IPv6); see "A server's
                                  name" below. A url with a user name or password
                                  (ws://user:pw@host) is refused (PLUGRL_INVALID_ARGUMENT):
                                  nothing would send them; use api_key. So is one with a
                                  fragment (#...; RFC 6455 3). A path and query are sent as
                                  given, bytes a request line cannot carry percent-encoded */
  const char *api_key;         /* sent as "Authorization: Api-Key <key>"; NULL: none. Sent in
                                  the clear over ws:// (use wss:// off a trusted network); a key
                                  with a control character (a line ending read from a file
                                  with it), or ending in a space or tab (which the header
                                  field drops), is refused: PLUGRL_INVALID_ARGUMENT */
  int32_t connect_timeout_ms;  /* name lookup + TCP + TLS + handshake; default 10000 */
  int32_t metadata_timeout_ms; /* for the server's metadata; default 30000 */
  int32_t receive_timeout_ms;  /* for an action after an infer; default 300000 */
  int32_t max_reconnects;      /* attempts after a lost connection; default 5; -1: never */
  int32_t reconnect_backoff_ms;/* first wait between attempts, doubling; default 100. When the
                                  server ended the last connection within 2 x max_backoff_ms of
                                  its start, the waits go on from the last reconnect's */
  int32_t max_backoff_ms;      /* cap on that wait; default 5000 */
  const char *tls_ca_file;     /* PEM file of CAs to trust for wss://; NULL: system roots. Not a
                                  regular file of at most 16 MiB (a FIFO, a device): plugrl_open
                                  fails with PLUGRL_INVALID_ARGUMENT */
  int32_t tls_insecure;        /* nonzero: do not verify the server's certificate, its chain
                                  nor its name (tests only). Either way: TLS 1.2 or later, and
                                  no client certificate is presented (a server that requires
                                  one refuses the connection, and the message says so) */
  int32_t disable_reuse;       /* nonzero: never use reuse-feedback-obs */
  int64_t max_message_size;    /* cap on one received message in bytes. 0 (default): derived,
                                  see below; -1: no cap (SPEC 1.1's default; trusted servers only) */
  const char *ledger_path;     /* record a step ledger here (see "The step ledger" below);
                                  NULL: the environment variable PLUGRL_LEDGER, if set */
  plugrl_log_fn log;           /* NULL: no logging */
  void *log_user;              /* passed to log */
  int32_t send_timeout_ms;     /* sending one message, counted from when the server stops
                                  taking bytes; default 10000 */
  int32_t close_timeout_ms;    /* plugrl_close's wait for the server's close frame; default 1000 */
  int32_t reconnect_timeout_ms;/* all attempts of one reconnect, backoff included; default 30000 */
  int32_t max_handshake_size;  /* bytes read before the WebSocket handshake completes, TLS
                                  included; default 262144 */
  int32_t ledger_level;        /* PLUGRL_LEDGER_DIGEST or PLUGRL_LEDGER_FULL; 0: the environment
                                  variable PLUGRL_LEDGER_LEVEL ("digest" or "full"; unset or
                                  empty: digest; any other value: plugrl_open fails with
                                  PLUGRL_INVALID_ARGUMENT) */
  const char *ledger_cpus;     /* the CPUs the ledger's background writer runs on, as taskset -c
                                  lists them ("3", "2-3,6"; Linux only); NULL or "": the
                                  environment variable PLUGRL_LEDGER_CPUS, if set and not empty,
                                  else wherever the process may run. See "The step ledger" below */
  int32_t dead_peer_timeout_ms;/* how long the server's machine may leave what this client sent,
                                  or its TCP keepalive probes, unanswered before the connection
                                  counts as lost; default 20000; at least 2000; -1: off (no
                                  keepalive). See "A server that vanishes" below */
  int32_t open_wait_ms;        /* how long plugrl_open keeps trying while the server cannot be
                                  reached yet (a robot that boots before its trainer); 0
                                  (default): one attempt; -1: until it answers. See "Waiting for
                                  the server" below */
} plugrl_options;

/*
** A server that vanishes. A server whose machine loses power, or whose
** network goes away (a robot out of Wi-Fi range, a cable pulled, a NAT
** that forgot the connection), sends nothing more: no close frame, no TCP
** reset. Without a bound, the client would learn of it only at
** receive_timeout_ms (5 minutes) inside an infer, or after the kernel's
** own retransmissions (about 15 minutes).
**
** dead_peer_timeout_ms is that bound: the connection counts as lost once
** the server's machine has owed an answer for that long and given none,
** to data the client sent or to the TCP keepalive probes the kernel sends
** after a quarter of the bound in silence (and every quarter after; at
** most once a second, hence a bound of at least 2000, so that each probe
** has time to be answered; at least every 32767 s, the kernel's limit).
** The library's poller reads the kernel's TCP_INFO once a second, and at
** the moment the bound would pass (Linux 5.4 and later). The connection
** is then lost without a close frame: the call waiting on it, or between
** calls the next call, returns as for any such loss (plugrl_infer and
** plugrl_feedback: PLUGRL_RECONNECTED, the feedback owed dropped, SPEC
** 7.6), the ledger records the close, the stats count it in
** reconnects_lost, and the message names the dead-peer timeout.
**
** Where TCP_INFO cannot tell (older kernels, other systems, qemu-user),
** the bound is the kernel's own: an idle connection ends after 8
** unanswered probes, nine probe intervals (2.25 times the bound; 9 s at
** 2000, measured 9.3 s), as above; one with data in flight, which Linux
** sends no probe on, ends at receive_timeout_ms (PLUGRL_TIMEOUT) or after
** the kernel's retransmissions.
**
** What it does not touch: a server that is slow, or busy learning and
** silent, still answers at the TCP level; so does one that stops reading
** (its window closed): it is there, and send_timeout_ms and
** receive_timeout_ms stay its bounds, so a machine that vanishes while
** its window is closed is noticed only by them. An outage shorter than
** the bound costs nothing when TCP's next probe or retransmission after
** it is answered within the bound; TCP's retransmissions back off (0.2,
** 0.4, 0.8 s, ...), and on an idle connection the last probe before the
** bound goes at three quarters of it, so an outage of over half the
** bound, or several segments lost in a row on a short bound, may end the
** connection: with 40 % of the client's segments lost (plugrl-hostile
** lossy), 90 s of exchanges saw 6 reconnects under a 2 s bound, 1 under
** 10 s and none under 20 s; with 20 % lost, none under 2 s to 20 s. On a
** lossy link, keep the default, 20 s, which is as long as a Python
** websockets server waits for a pong before it drops a client.
**
** Measured against a server whose packets are dropped (plugrl-hostile
** vanish, vanish-unacked) with the bound at 2000 ms: the infer returned
** after 2.00-2.05 s, and a client idle between calls found the connection
** gone at its next call, at once; with the network back after 1 s, the
** infer got its action after 1.0-1.7 s on the same connection.
*/

/*
** A process that stops. A deadline is when the library stops waiting, not
** when it stops looking. A thread that could not run past its deadline (a
** debugger's breakpoint, Ctrl-Z or SIGSTOP, a frozen container, a thread
** starved by higher-priority ones) finds, when it runs again, what arrived
** meanwhile: before a call reports PLUGRL_TIMEOUT for a receive deadline,
** it reads what its socket already holds, without waiting, and an action
** there whole is returned (PLUGRL_OK, the connection kept); a send whose
** deadline passed sends what the socket takes at once (on Linux, ws://
** and wss:// alike: a TLS record goes whole or the connection ends;
** elsewhere a send past its deadline fails). This last look lasts at most 50 ms, so a server that floods cannot
** stretch it, and a call whose thread ran on time while its server was
** late still returns at its deadline: the look finds nothing there. A
** receive_timeout_ms of 1000 or more is kept by the library's poller, and
** a look of its that comes more than 10 ms late gives the call those 50 ms
** too. A process stopped for longer than its server waits for the pongs to
** its pings (20 s for a Python websockets server) may find the connection
** closed by the server: the call returns as for any lost connection
** (PLUGRL_RECONNECTED; websockets closes with 1011 and the reason
** "keepalive ping timeout", which the library takes for what it is, not
** for the server failing).
**
** Measured (tests/c/hostile.c case stopped: the process stopped 100 ms
** into an infer for receive_timeout_ms + 1 s, the action arriving 800 ms
** after the infer): PLUGRL_OK as soon as it was continued, the connection
** kept, with a receive_timeout_ms of 700 and of 1500, over ws:// and wss://;
** the library before this returned PLUGRL_TIMEOUT and reconnected. Stopped
** for 5 s between calls against a Python websockets server that pings
** every second and waits 2 s (CTest keepalive): the next infer returned
** PLUGRL_RECONNECTED, and the exchange after it PLUGRL_OK; before,
** PLUGRL_SERVER_ERROR ("the server failed (1011)").
*/

/*
** Waiting for the server. A robot often starts before its trainer: both
** come up at boot, a launch file starts them together, or the trainer is
** restarting. By default plugrl_open makes one attempt, and a server that
** is not listening yet fails it at once (PLUGRL_CONNECT_FAILED). With
** open_wait_ms, plugrl_open keeps trying for that long (-1: until the
** server answers), with the reconnect backoff between attempts
** (reconnect_backoff_ms, doubling up to max_backoff_ms, with jitter), each
** attempt's connect_timeout_ms and metadata_timeout_ms cut to what is left
** of the wait; no attempt starts with less than 20 ms of it left (the last
** pause then runs to the wait's end, and plugrl_open fails with the last
** attempt's status: a refused port stays PLUGRL_CONNECT_FAILED rather than
** an attempt's timeout). It keeps trying on what the server's side can
** mend: a connection refused, reset or timed out, a host or network
** unreachable, a name not found yet (mDNS at boot), an HTTP 5xx answer
** (a full server, a proxy whose backend is down), 429 or 408 (a proxy
** that limits how fast clients come), a connection closed before the
** handshake, or lost or closed with 1001 (going away), 1012 (service
** restart), 1013 (try again later) or 1014 (bad gateway) before the
** metadata, a connect or metadata timeout; and over wss://, a server's
** certificate that is not valid yet by this machine's clock (a robot's
** computer without a battery-backed clock boots with the wrong time, and
** has the right one once NTP sets it: the certificate is still verified in
** full when it does; without a wait the message says that the clock is
** behind and from when the certificate is valid). Anything else ends it
** at once with its own status: a certificate that does not verify (an
** expired one included), an HTTP answer other than 5xx, 429 or 408, a
** protocol error, the server's stop. A refusal's Retry-After field (a
** 503's or 429's: how long the server asks clients to stay away; read if
** it came in the same read as the status line) makes the pause before
** the next attempt at least that long, up to max_backoff_ms (and what is
** left of the wait), whatever the server asks (a date in it is counted
** from the response's own Date, so a clock NTP has not set yet does not
** matter); reconnects heed it the same way. plugrl_interrupt
** (and plugrl_interrupt_all) ends the wait at once with
** PLUGRL_INTERRUPTED; the log callback is told of each failed attempt
** (PLUGRL_LOG_INFO), with its cause: a name that is misspelt, or a ws://
** url at a TLS port that closes without answering, looks like a server
** not up yet, and with -1 is tried until interrupted. When the wait ends
** without a server, the status is the last attempt's
** (PLUGRL_CONNECT_FAILED or PLUGRL_TIMEOUT) and the message says how long
** it waited and how many attempts it made. Reconnects after a connection
** was made keep their own bounds (max_reconnects, reconnect_timeout_ms).
**
** Measured (CTest server_late, the server started a second after the
** client): with open_wait_ms 10000 (backoff 50 to 200 ms) the open
** connected after 1137-1143 ms and 8-9 attempts; a 500 ms wait with no
** server ended at 500.3-500.8 ms; plugrl_interrupt ended a wait of -1
** within 0.3 ms. Over wss://, a certificate valid from 1.5 to 2.5 s after
** the server started (case clock-behind): without a wait
** PLUGRL_CONNECT_FAILED in 2.6-5.9 ms, the message saying the clock is
** behind; with open_wait_ms 10000, connected after 2217 ms and 15
** attempts.
*/

/*
** Proxies. The client connects to the url's host itself: it does not read
** HTTP_PROXY, HTTPS_PROXY, ALL_PROXY or NO_PROXY (nor their lowercase
** forms), and speaks no HTTP CONNECT. A robot's environment often has a
** proxy set for its package manager; it does not apply here. A trainer
** reachable only through a proxy needs a tunnel of the caller's own (ssh
** -L, a socat relay) and a url naming its local end: with wss://, the
** certificate is then checked against that name, so the tunnel's end
** must be named as the certificate names the server (an /etc/hosts line
** pointing that name at 127.0.0.1), not tls_insecure.
**
** Credentials. The api_key goes in the upgrade request's Authorization
** field, in the clear over ws:// (anyone on the path can read it): use
** wss:// off a network you control. It is never in plugrl_errmsg, a log
** message, the step ledger or the stats. A redirect (3xx) is never
** followed, so the key goes to no host but the url's; the message quotes
** the Location to use instead.
*/

/*
** A server's name. A url's host may be a name (trainer.local over mDNS, a
** DNS record, /etc/hosts), looked up afresh at every connect and
** reconnect, as the system does (Go's own resolver, or glibc's
** getaddrinfo where /etc/nsswitch.conf names sources Go does not know,
** such as mdns; GODEBUG=netdns=go or =cgo chooses). The lookup is part of
** the connect: connect_timeout_ms bounds it, and plugrl_interrupt ends
** it at once.
**
** A name often has more than one address, and some lead nowhere: a
** workstation publishes over mDNS the address of each of its interfaces
** (a Docker bridge's, an unplugged cable's), and a DNS record may hold an
** old one. The addresses are tried as RFC 8305 (Happy Eyeballs) tries
** them: the first gets 250 ms to connect on its own, then the next starts
** beside it, and so on (at once when every attempt running has failed),
** families alternating (IPv6, IPv4, IPv6, ...) from the resolver's first;
** the first connection made is used and the others are closed. Each
** attempt may run until connect_timeout_ms, and at most 16 addresses are
** tried (an address the resolver repeats, once). A reconnect tries the
** address of the last connection first, when the name still has it. When
** none connects, the message names every address tried and why each
** failed. A step ledger's connect record names the address each
** connection went to.
**
** Measured (tests/names.sh): a name whose first address drops every SYN
** connected in 252 ms under a 2000 ms connect timeout, with either
** resolver. Before, the first address took the whole 2000 ms and the open
** failed (its message named one address or the other as timing had it,
** often the one that would have answered); under the default 10000, the
** first address took 5000 at every connect and reconnect. A reconnect
** (reconnect_backoff_ms 1) took 1.7-3.9 ms; 253.5-255.0 ms when it did not
** try the last connection's address first.
*/

/*
** The step ledger. With options.ledger_path (or PLUGRL_LEDGER) set, the
** client records every message it sends and receives, with a monotonic
** timestamp, and its connections' lives (connect and metadata, closes with
** code and reason, reconnects and why, feedback dropped and for which envs,
** interrupts) into a zstd-compressed file that `plugrl ledger` summarises,
** audits against the SPEC, turns into the bridge server's episode log, and
** exports (docs/LEDGER.md). A path naming an existing directory gets one
** file per handle, plugrl-<pid>-<n>.ledger (never one that exists); a
** regular file is created or truncated the first time this process uses
** its path, and each later handle given the same path (PLUGRL_LEDGER in a
** program with several handles) writes <path>.2, <path>.3, ... instead,
** as does a handle whose file another ledger (of this process or another)
** is writing: no ledger overwrites another while it is written (a file
** system without locks aside), and none in a directory ever does.
**
** PLUGRL_LEDGER_DIGEST (the default) keeps every message whole except
** observation arrays, which are kept as an Adler-32 per env row (computed
** in the same pass that copies the row to the socket);
** PLUGRL_LEDGER_FULL keeps every byte, so a ledger can become a dataset.
**
** The calling thread only copies (and digests) into a bounded queue (8 MiB);
** a background thread compresses and writes it at least every 100 ms. A
** full queue never stalls the call: the record is dropped and the ledger
** says how many were. A message larger than the whole queue (over 8 MiB at
** PLUGRL_LEDGER_FULL: several envs' camera images) is never recorded, and
** the log callback says so once. That thread runs wherever the process may run: on a
** process pinned to one core, on the control loop's core. ledger_cpus
** gives it CPUs of its own (a housekeeping core: the compression then
** costs the loop nothing but the copies); the writer then keeps an OS
** thread of its own while the ledger is open. A list that does not parse,
** or that the kernel cannot give whole (a CPU offline or outside the
** process's cpuset), makes plugrl_open fail with PLUGRL_INVALID_ARGUMENT
** and a message naming the CPUs this thread may run on. A process killed without plugrl_close leaves a
** ledger readable up to its last written block. A ledger file that cannot
** be created, or a path that is not a regular file or a directory (a FIFO,
** a device), makes plugrl_open fail with PLUGRL_INVALID_ARGUMENT (one the
** process has no descriptor left to open: PLUGRL_CONNECT_FAILED). The
** file is synced to disk (fsync) once, by plugrl_close after the last
** record; before that, a power cut keeps only what the kernel had written
** back. A new file gets mode 0644 less the umask. A write
** that fails later (a full disk), or a file deleted or truncated by
** someone else while it is written, ends the ledger at its last block
** written: the log callback is told, at PLUGRL_LOG_WARN, on the thread of
** the next call that would have recorded, and again by plugrl_close, at
** PLUGRL_LOG_ERROR; the calls themselves go on. plugrl_close waits at most
** 5 s for the ledger's last records (a file that stops taking writes, on a
** stalled disk, does not hold it longer).
**
** On Linux 6.12 and later the writer's thread asks for a 100 us scheduler
** slice (sched_setattr) while it flushes, so that a loop thread woken on
** its core preempts it at once, and gets the slice it had back after; it
** never changes a caller's thread. A seccomp filter that refuses
** sched_getattr or sched_setattr with an error makes it stop asking; one
** that kills the process on them must allow them for a ledger to be used.
** The writer's CPU time is written into the ledger's end record, and
** `plugrl ledger summary` prints it per exchange.
*/
#define PLUGRL_LEDGER_DIGEST 1
#define PLUGRL_LEDGER_FULL 2

/*
** The derived message size cap (max_message_size 0): an action may take
** H x n x action_dim x 8 bytes plus 64 bytes per env and 64 KiB for its
** structure, when metadata gives action_horizon and action_dim (H and
** action_dim from metadata, n the envs of the infer), but never more than
** 64 MiB, which is the cap otherwise: metadata is the server's word too.
** Metadata may take 4 MiB. A frame announcing more is refused before any
** of it is read (PLUGRL_PROTOCOL_ERROR), and receive memory grows only as
** bytes arrive. A receive buffer over 1 MiB is freed after the call that
** needed it; plugrl_close frees everything.
*/

/*
** Fills *options with defaults and sets options->size. Call it as
** plugrl_options_init(&options): a macro, which passes this header's
** sizeof(plugrl_options) to plugrl_options_init_size (new in 0.2: a
** program built against this header needs a library of 0.2 or later). A
** program built against this header and run with a newer library (more
** fields) or an older one (fewer) then works as built: each side reads and writes only
** the bytes both know, and plugrl_open refuses (PLUGRL_INVALID_ARGUMENT,
** naming the byte) a nonzero field that the library it runs with does not
** have, rather than ignore an option it cannot honour. Returns
** PLUGRL_INVALID_ARGUMENT if options is NULL. Thread-safe; touches nothing
** but *options.
**
** The function of that name is what binaries built against release 0.1's
** header call (it was a function then): it fills 0.1's struct, which ends
** at ledger_cpus, and goes on doing so as the struct grows.
*/
plugrl_status plugrl_options_init(plugrl_options *options);
#define plugrl_options_init(options) plugrl_options_init_size((options), sizeof(plugrl_options))

/*
** What the macro calls: writes exactly `size` bytes at options (the
** defaults of every field this library has that fits, zero past its own
** struct) and sets options->size to `size`. `size` is the caller's
** sizeof(plugrl_options): what a binding without C macros (Rust's
** bindgen, a dlsym caller) passes. PLUGRL_INVALID_ARGUMENT if options is
** NULL, or `size` is smaller than the first release's struct (ending at
** max_backoff_ms), larger than 4096, or not a multiple of the struct's
** alignment, as no sizeof is (nothing is written then). plugrl_open
** refuses a `size` field that breaks these rules the same way, rather
** than read a field it ends inside of.
*/
plugrl_status plugrl_options_init_size(plugrl_options *options, size_t size);

/*
** A client: one session with a server (low level).
*/
typedef struct plugrl_client plugrl_client;

/*
** Connects to options->url, waits for the server's metadata, and sets
** *client. Blocks up to connect_timeout_ms + metadata_timeout_ms, or with
** open_wait_ms up to that long (-1: until the server answers; see "Waiting
** for the server"). *client
** is set before the connection starts: plugrl_interrupt(*client) from
** another thread or a signal handler ends the open at once with
** PLUGRL_INTERRUPTED (a Ctrl-C while the server is unreachable, say).
**
** Like sqlite3_open, *client is set even when the connection fails (unless
** client is NULL or memory ran out): plugrl_errmsg(*client) says why, and
** the caller must still plugrl_close it. Every other call on a handle whose
** open failed returns PLUGRL_CONNECT_FAILED.
*/
plugrl_status plugrl_open(const plugrl_options *options, plugrl_client **client);

/*
** Sends a close frame with status 1000 (SPEC 7.5), waits up to
** close_timeout_ms for the server's answer (plugrl_interrupt_all ends the
** wait; the handle is dead by then, so plugrl_interrupt cannot), writes
** a step ledger's last records (at most 5 s more, see "The step ledger"),
** and frees everything the handle owns. Afterwards the handle is dead: calls on it return
** PLUGRL_CLOSED. Closing NULL or a dead handle returns PLUGRL_CLOSED and
** does nothing else.
**
** Any thread may call it, also while another thread is inside a call on
** client (or on a runner over it): that call is interrupted as by
** plugrl_interrupt, and plugrl_close waits for it to return (within
** milliseconds) before it frees anything, so it never returns PLUGRL_BUSY
** and never leaks. The interrupted call returns PLUGRL_INTERRUPTED or
** PLUGRL_CLOSED; or, when the close came too late to stop it (its action
** had already arrived, or its feedback was already on its way), its own
** result, PLUGRL_OK included.
*/
plugrl_status plugrl_close(plugrl_client *client);

/*
** Interrupts the call running on client, from any thread, and from a
** signal handler: it is async-signal-safe (it only raises a flag and
** writes to an eventfd; it keeps errno). The call returns
** PLUGRL_INTERRUPTED within milliseconds (see that status for the state
** of the connection). If no call is running, the next plugrl_infer or
** plugrl_runner_act on client returns PLUGRL_INTERRUPTED at once without
** sending anything; plugrl_feedback and plugrl_runner_report are not
** refused for an interrupt that came before them (their feedback is
** owed) unless the connection had ended and they must reconnect, and one
** that comes while they wait on the server ends them.
** Returns PLUGRL_OK, or PLUGRL_CLOSED for a NULL or dead handle.
*/
plugrl_status plugrl_interrupt(plugrl_client *client);

/*
** plugrl_interrupt for every client of the process (and so every runner
** over them), including one that plugrl_open is still connecting (from
** the moment plugrl_open is called: one that begins after this call
** returned is not interrupted, so a handler's program checks its own flag
** just before plugrl_open, with no other call into the library in
** between: a thread's first call attaches it to the Go runtime, which can
** take milliseconds), and one that plugrl_close is closing (its
** wait for the server's close frame ends at once): for a SIGINT handler
** that has no handle at hand.
** Async-signal-safe, like
** plugrl_interrupt. Each client that is not in a call gets the interrupt
** pending, as plugrl_interrupt says. Returns PLUGRL_OK (PLUGRL_CLOSED in a
** forked child).
*/
plugrl_status plugrl_interrupt_all(void);

/*
** Adds SA_ONSTACK to every signal handler installed in the process that
** lacks it, keeping each handler, its mask and its other flags, and
** returns how many it changed. plugrl_open does the same (once its
** options are accepted), and so does each thread's first call, so this
** is needed only for handlers that lack SA_ONSTACK and were installed
** after a plugrl_open (rclcpp::init() after the client is open, which
** installs SIGINT and SIGTERM handlers without it; ProfilerStart() in the
** middle of a run); see PROCESS FACTS above for why. It changes
** process-wide state: a handler another thread installs while it runs
** is put back as that thread installed it (each change is checked against
** what it replaced), and is then left without SA_ONSTACK; until it is put
** back (microseconds), the action it replaced is installed again, and a
** signal then runs that (a thread installing a handler while another ran
** this in a loop read back the one it had replaced 5 times in 696). Do
** not install or remove handlers concurrently with this or with
** plugrl_open if the replaced handler must never run again (a plugin
** that restores its predecessor's handler and is then unloaded). Not
** async-signal-safe.
*/
int plugrl_fix_signal_handlers(void);

/*
** The message of the last call on client that did not return PLUGRL_OK, in
** English, NUL-terminated; "" if there was none. The text is the calling
** thread's own copy, valid until this thread calls plugrl_errmsg or
** plugrl_runner_errmsg again (closing the handle does not end it). For a
** NULL or dead handle, a static message saying so. Safe to call from any
** thread: a message is never seen half written (while another thread is
** inside a call on client, it gives the PLUGRL_BUSY message).
*/
const char *plugrl_errmsg(plugrl_client *client);

/*
** METADATA (SPEC 5.1). A server may leave out any key, and absent never
** means zero: each getter sets *present to 1 and the value when the key is
** there with a value of the right type, and *present to 0 otherwise, and
** returns PLUGRL_OK either way. Metadata is re-read on every reconnect.
** A metadata map that gives a key twice has no one value for it, and is
** refused like any malformed first message (PLUGRL_PROTOCOL_ERROR from the
** call that connects): each key the getters show is the value the library
** itself acts on.
*/

/* An integer key: "protocol_version", "action_horizon", "action_dim", or
** any other key whose value is an integer (numpy scalars included). */
plugrl_status plugrl_metadata_int(plugrl_client *client, const char *key, int64_t *value, int *present);

/*
** A string key: "server", "server_version", "algorithm", "policy", or any
** other whose value is a msgpack str (a bin value is bytes, as Python reads
** it, not a string: *present 0; plugrl_metadata_json shows it). Copies the
** value (its bytes as sent: UTF-8 from an honest server, not checked, and
** it may hold a NUL of its own) and a NUL into buf (size bytes) and sets
** *length (if length is not NULL) to the value's length without the NUL.
** If size is not enough, returns PLUGRL_BUFFER_TOO_SMALL with *length set.
** buf NULL with size 0 returns PLUGRL_OK and only sets *length: the way to
** ask for the length first.
*/
plugrl_status plugrl_metadata_string(plugrl_client *client, const char *key, char *buf, size_t size, size_t *length, int *present);

/* Whether metadata "features" lists feature (e.g. "reuse-feedback-obs"):
** *present is 1 if it does, 0 if not or if features is absent or is not
** a list of at most 1024 strings (what the library itself reads, e.g. for
** reuse; plugrl_metadata_json shows such a value as it is). */
plugrl_status plugrl_metadata_has_feature(plugrl_client *client, const char *feature, int *present);

/*
** Any key as JSON, or the whole metadata map when key is NULL. Copies like
** plugrl_metadata_string. numpy scalars become numbers; an ndarray becomes
** {"dtype": ..., "shape": [...], "data": [...]} (a map tagged as numpy's
** that is not a valid one, or that holds a map or an array of arrays or
** maps, as numpy's never do: the map as it is); bin a string (base64
** unless UTF-8); non-finite floats and msgpack ext values null.
** A value that has no JSON form (nested more than 64 deep, or a map key
** that is not a string holding another such key; metadata may hold
** either) returns PLUGRL_PROTOCOL_ERROR with *present 0; unlike that
** status elsewhere, the connection is unchanged (metadata is only read).
*/
plugrl_status plugrl_metadata_json(plugrl_client *client, const char *key, char *buf, size_t size, size_t *length, int *present);

/*
** LOW LEVEL: infer / feedback (SPEC 4). On one connection the calls must
** alternate: infer, feedback, infer, feedback... Anything else returns
** PLUGRL_OUT_OF_ORDER and sends nothing. So does an infer naming an env
** that still holds an action chunk (one not yet named by a feedback on
** this connection): the server keeps one chunk per env (SPEC 4.3).
*/

/*
** An action chunk received from the server: `data` holds
** shape[0] * ... * shape[ndim-1] elements of `dtype`, with shape
** [H, n, *da]: time-major, so step k of the j-th env of the request is at
** element (k * n + j) * step_size. `env_ids` lists the n envs in the
** request's order. All pointers are library memory, aligned for the dtype
** and in host byte order, valid until the next call on the client.
*/
typedef struct plugrl_action {
  const void *data;
  plugrl_dtype dtype;
  int32_t ndim;
  const int64_t *shape;
  const int64_t *env_ids;
  int64_t horizon;   /* H = shape[0] */
  int64_t num_envs;  /* n = shape[1] */
  int64_t step_size; /* elements in one env's one step: prod(shape[2:]) */
} plugrl_action;

/*
** Sends an infer for the n envs env_indices[0..n-1] (1 <= n <= 2^20;
** distinct, >= 0) with step_ids[0..n-1] (the chunks each env completed in
** its episode; zeros are accepted), and waits for the action. obs holds one row per env, in
** env_indices order.
**
** reuse may be NULL. Otherwise reuse[i] nonzero says env i's observation is
** the one its last feedback on this connection sent, so it is not sent
** again (SPEC 10.1). That is allowed only if the server lists
** reuse-feedback-obs, and that feedback was on this connection and did not
** end the episode (else PLUGRL_INVALID_ARGUMENT, nothing sent). With reuse,
** obs may hold all n rows (reused rows are skipped) or only the rows of the
** envs not reused.
**
** On PLUGRL_OK, *action views the chunk until the next call on client.
** Blocks up to send_timeout_ms + receive_timeout_ms, plus
** reconnect_timeout_ms when it reconnects (because the connection had
** ended before the call, or ended during it). Returns PLUGRL_RECONNECTED when the
** connection was replaced (infer again), PLUGRL_STOPPED at the end of the
** run.
*/
plugrl_status plugrl_infer(plugrl_client *client, const int64_t *env_indices, const int64_t *step_ids, size_t n,
                           const plugrl_observation *obs, const uint8_t *reuse, plugrl_action *action);

/*
** Copies the last action's data into dst, converting every element to
** dtype (float to integer truncates toward zero and saturates). dst_size is
** dst's size in bytes; the action needs H * n * step_size elements, and a
** smaller dst gets PLUGRL_BUFFER_TOO_SMALL. Only between a successful
** plugrl_infer and the next plugrl_infer, plugrl_feedback, or
** plugrl_runner_act or plugrl_runner_report of a runner over client (its
** infers and reconnects replace the memory the action views); other calls
** leave the action in place. Otherwise PLUGRL_OUT_OF_ORDER.
*/
plugrl_status plugrl_action_copy(plugrl_client *client, void *dst, size_t dst_size, plugrl_dtype dtype);

/*
** Finished episodes' statistics for feedback's info.episode (SPEC 5.4), one
** entry per feedback env: the return, the length in env steps, whether it
** succeeded (success may be NULL), and mask[i] nonzero where env i's
** episode ended at this step (other entries are ignored by servers).
*/
typedef struct plugrl_episode {
  const double *returns;
  const int64_t *lengths;
  const uint8_t *success;
  const uint8_t *mask;
} plugrl_episode;

/*
** Sends the feedback owed for the last action (SPEC 5.4) for m envs, each
** of which must hold an action chunk on this connection (from this infer or
** an earlier one): next_obs is the observation after their chunk's last
** step (the terminal one for an env that ended), rewards the chunk's summed
** reward, terminated/truncated the last step's flags (any nonzero byte
** counts as 1; the wire gets 0 or 1), episode
** NULL or the stats of episodes ending here. Returns PLUGRL_RECONNECTED if
** the connection ended before the feedback could be sent: it was dropped,
** as SPEC 7.6 requires; infer again. Blocks only when the server stops
** taking bytes: up to send_timeout_ms (then PLUGRL_TIMEOUT, connection
** dropped), plus reconnect_timeout_ms if the connection had ended.
**
** When the last plugrl_infer came within 1 ms of the feedback before it (a
** loop that steps its envs and infers at once), a feedback of up to 64 KiB
** that ends no episode is held in the handle's send buffer and leaves with
** the next infer, in one system call and one TCP segment: the client makes
** one send per exchange and the server wakes once for both. If that infer
** is late, the feedback reaches the server as much later, or after 10 to
** 20 ms, whichever is first (a timer on a library thread sends it);
** plugrl_close sends it before it returns. plugrl_interrupt between calls
** has a library thread send it within about a millisecond (the interrupt
** itself only raises a flag, to stay async-signal-safe), when no write is
** under way and the socket takes it without waiting. A process that exits
** (or a connection that fails) before then without plugrl_close loses it:
** a SIGINT handler that interrupts should let the program plugrl_close
** before it exits. A connection that fails before it leaves drops
** it, as any feedback owed (SPEC 7.6): its envs count in
** feedback_rows_dropped, and a step ledger's close record names them and
** says the last feedback never left (`unsent`). Over wss:// it is sent at
** once.
*/
plugrl_status plugrl_feedback(plugrl_client *client, const int64_t *env_indices, const int64_t *step_ids, size_t m,
                              const plugrl_observation *next_obs, const float *rewards, const uint8_t *terminated,
                              const uint8_t *truncated, const plugrl_episode *episode);

/* Whether env's observation may be reused in the next infer (SPEC 10.1):
** *yes is 1 when the server offers the feature and env's last feedback on
** this connection did not end its episode. A negative env is
** PLUGRL_INVALID_ARGUMENT (*yes 0). */
plugrl_status plugrl_can_reuse(plugrl_client *client, int64_t env, int *yes);

/*
** STATISTICS: live counters of a client (or a runner), cheap enough to read
** every control step: plugrl_stats allocates nothing, takes no lock of the
** handle's and sends nothing (well under a microsecond). Like every call,
** it waits, asleep, while a plugrl_close or plugrl_runner_free of another
** handle collects garbage (about a millisecond; see PROCESS FACTS).
**
** Threads: unlike the other calls, plugrl_stats and plugrl_runner_stats may
** be called from any thread at any time, also while another thread is
** inside a call on the same handle (they never return PLUGRL_BUSY). Each
** field is read atomically, so no field is ever torn; but the fields are
** not read at one instant: a call running meanwhile may show in some
** fields and not yet in others (e.g. an exchange counted in `exchanges`
** whose bytes are already in `bytes_received`, or the reverse).
**
** Counts never reset: they cover the handle's whole life and accumulate
** across reconnects. Not async-signal-safe.
**
** The struct is plugrl_statistics, not plugrl_stats: C has one namespace
** for functions and typedefs, and plugrl_stats is the function.
**
** Size: set `size` to sizeof(plugrl_statistics) before the call:
**
**   plugrl_statistics st;
**   st.size = sizeof st;
**   if (plugrl_stats(client, &st) == PLUGRL_OK) ...
**
** The library fills only the fields that fit wholly in `size` (it never
** writes `size`),
** so a program built against an older header, whose struct is smaller,
** keeps working with a newer library whose struct has grown; fields are
** only ever appended. A size smaller than this first version's struct
** (PLUGRL_STATS_SIZE_V1 bytes) returns PLUGRL_INVALID_ARGUMENT.
*/
typedef struct plugrl_statistics {
  size_t size; /* sizeof(plugrl_statistics), set by the caller */

  /* Infers answered: actions received and accepted (they matched their
  ** request). One per successful plugrl_infer (or runner infer), and also
  ** one per infer whose valid action came but whose call still failed: it
  ** arrived as plugrl_interrupt ended the wait (PLUGRL_INTERRUPTED), or a
  ** runner could not keep it (PLUGRL_NO_MEMORY for its chunk, or
  ** PLUGRL_PROTOCOL_ERROR for a width changed while an env was in the
  ** middle of a chunk). */
  uint64_t exchanges;
  /* Feedback messages sent whole (each may cover many envs), counted when
  ** their last byte goes to the kernel: one held for the next infer (see
  ** plugrl_feedback) when it leaves, and one whose connection ends first
  ** never. */
  uint64_t feedbacks;
  /* Bytes of WebSocket frames written / read on every connection: frame
  ** headers and payloads, control frames (ping, pong, close) included; not
  ** the HTTP handshake and not TLS's own record overhead. */
  uint64_t bytes_sent;
  uint64_t bytes_received;

  /* Successful reconnects, in total and by why the connection had ended.
  ** reconnects is the sum of the five below. Failed attempts are not
  ** counted; a reconnect counts when the new connection is up. */
  uint64_t reconnects;
  /* The server closed with reason plugrl-server-resync (SPEC 7.2). */
  uint64_t reconnects_resync;
  /* The server closed with reason "Feedback timeout" (SPEC 7.3). */
  uint64_t reconnects_feedback_timeout;
  /* This client's own deadline passed: receive_timeout_ms waiting for an
  ** action, or send_timeout_ms sending (PLUGRL_TIMEOUT). */
  uint64_t reconnects_timeout;
  /* The connection ended without a close frame (a server whose machine
  ** went away included: dead_peer_timeout_ms), or the server closed it
  ** with any other code or reason (1011 included), or sent a text frame. */
  uint64_t reconnects_lost;
  /* The library dropped the connection itself: after an interrupt, a
  ** malformed or inconsistent message from the server, a message over the
  ** size cap, or memory that ran out. */
  uint64_t reconnects_other;

  /* Feedback owed on a connection that ended, and therefore never sent
  ** (SPEC 7.6), counted in envs (rows): an env holding an action chunk
  ** when its connection ended counts 1, as does each env of an action
  ** that arrived as plugrl_interrupt ended the infer waiting for it (the
  ** infer returns PLUGRL_INTERRUPTED; a reply that is no valid action
  ** owes nothing), and each env of a feedback held to leave with the next
  ** infer (see plugrl_feedback) that never left. Not counted at
  ** plugrl_close. */
  uint64_t feedback_rows_dropped;
  /* Observation rows not sent because of reuse-feedback-obs (SPEC 10.1):
  ** reuse[i] set in an infer that was sent (the runner does it itself). */
  uint64_t rows_reused;
  /* Calls on the handle that returned PLUGRL_INTERRUPTED (plugrl_infer,
  ** plugrl_feedback, plugrl_runner_act, plugrl_runner_report). */
  uint64_t interrupts;

  /* The infer round trip, in microseconds: from when the infer's last byte
  ** had been written to the socket to when the action's last byte had been
  ** read (before decoding), of the infers counted in `exchanges`. last and
  ** max are exact; p50 and p99 (the median and the 99th percentile over
  ** the handle's life) come from a histogram kept in the library with log-
  ** scale buckets (8 per power of two) and are within 6.25 % of the true
  ** value (0.5 us below 8 us), never above max. All four are 0 while
  ** exchanges is 0. */
  double rtt_last_us;
  double rtt_p50_us;
  double rtt_p99_us;
  double rtt_max_us;

  /* Runner only (plugrl_stats sets them to 0): episodes that ended
  ** (terminated or truncated) in plugrl_runner_report calls, and env steps
  ** reported: num_envs per plugrl_runner_report whose arguments were
  ** accepted (the steps count even if sending their feedback failed). */
  uint64_t episodes;
  uint64_t env_steps;
} plugrl_statistics;

/* sizeof(plugrl_statistics) in its first version: the smallest size
** accepted. */
#define PLUGRL_STATS_SIZE_V1 (offsetof(plugrl_statistics, env_steps) + sizeof(uint64_t))

/*
** Fills *out (up to out->size bytes, see above) with client's counters.
** Returns PLUGRL_OK; PLUGRL_CLOSED for a NULL or dead handle;
** PLUGRL_CONNECT_FAILED for a handle whose plugrl_open failed, or has
** not connected yet (another thread's plugrl_open is still running);
** PLUGRL_INVALID_ARGUMENT if out is NULL or out->size is too small. Any
** thread, any time (see STATISTICS above).
*/
plugrl_status plugrl_stats(plugrl_client *client, plugrl_statistics *out);

/*
** RUNNER: N envs in lockstep. Each step:
**
**   plugrl_runner_act(r, &obs, actions, sizeof actions, PLUGRL_DTYPE_F64);
**   ...step every env i with its action...
**   plugrl_runner_report(r, &next_obs, rewards, terminated, truncated, NULL);
**   ...reset the envs that ended, so that obs is next_obs with those rows reset...
**
** Env i of the runner is env index i on the wire. The runner infers only
** for envs whose chunk ran out, sums rewards over each chunk, ends a chunk
** early at a done and sends that step's terminal observation, fills
** step_ids and info.episode, reuses observations when the server offers
** it (only observations given to this runner: not before one of its own
** infers has been answered on the connection, so a runner made over a
** client that another runner or the caller fed back on sends every
** observation at its first act), and rides through resyncs and reconnects
** (dropping what it must) without returning PLUGRL_RECONNECTED.
**
** Memory: each env keeps its current chunk, at the size the server sent
** it, in memory from malloc (a chunk over 1 MiB is freed once stepped
** through, or when a reconnect drops it). Envs inferred at different times can each hold a chunk of up
** to one message's cap at once (see max_message_size): a runner's total
** follows the bytes received, up to num_envs x that cap.
*/
typedef struct plugrl_runner plugrl_runner;

/*
** Creates a runner of num_envs envs (1 to 2^20) over client, which it
** borrows: free the runner before closing the client. Calls on a runner
** whose client was closed return PLUGRL_CLOSED. The client must not be
** used directly while the runner is in use, nor by a second runner: one
** runner at a time per client. A runner's first act gives up what an
** earlier user left owed (see plugrl_runner_free), so an older runner
** used after it finds its chunks gone with that connection: its act
** returns PLUGRL_OUT_OF_ORDER, saying so, and its report sends nothing
** for them (SPEC 7.6); free it. The runner's state takes 72
** bytes per env besides its chunks; PLUGRL_NO_MEMORY if malloc cannot
** give as much.
*/
plugrl_status plugrl_runner_new(plugrl_client *client, size_t num_envs, plugrl_runner **runner);

/* Frees the runner (not its client) and the memory its chunks held.
** Further calls on it return PLUGRL_CLOSED. Any thread may call it: a
** call running on the runner is interrupted and waited for, as in
** plugrl_close. Feedback the runner still owed (freed between act and
** report, or with chunks not stepped through, as at the end of most runs)
** is given up (SPEC 7.6): the client's next infer, a new runner's or a
** direct one, drops the connection and reconnects (a direct one returns
** PLUGRL_RECONNECTED), where it would otherwise be refused as out of
** order; plugrl_close closes in order, as always. (Not while another
** thread is inside a call on the client, which the runner must not
** share: then only the runner is freed, and the next runner's first act
** gives that feedback up instead: a runner's first act gives up any
** feedback owed on its client from before it.) From inside the episode callback
** (which runs inside plugrl_runner_report) it returns PLUGRL_BUSY, as
** plugrl_close of the runner's client does there. */
plugrl_status plugrl_runner_free(plugrl_runner *runner);

/* Like plugrl_errmsg, for a runner. */
const char *plugrl_runner_errmsg(plugrl_runner *runner);

/* plugrl_interrupt for a runner: interrupts the call running on the
** runner (which waits on its client). Async-signal-safe. */
plugrl_status plugrl_runner_interrupt(plugrl_runner *runner);

/*
** Gives this step's action for every env: obs has num_envs rows (the
** current observation of every env), and actions receives num_envs *
** step_size elements of dtype (converted from the server's dtype), env i's
** at element i * step_size. actions_size is its size in bytes; a wrong size
** returns PLUGRL_INVALID_ARGUMENT with the needed size in the message.
** step_size is known from metadata action_dim, or after the first act from
** plugrl_runner_step_size; until it is known (no action_dim in metadata,
** before the first action, or after a reconnect), a wrong size is found
** only once the action came, after the infer was sent (the chunk is kept:
** act again with the right size). Blocks when an infer is needed, as long
** as plugrl_infer would, once per reconnect it rides through (at most 3,
** and on a runner's first act one more: the reconnect that gives up
** feedback an earlier user of the client left owed).
** An interrupt ends it at once even when no infer is needed (every env in
** the middle of its chunk): PLUGRL_INTERRUPTED, no action given.
*/
plugrl_status plugrl_runner_act(plugrl_runner *runner, const plugrl_observation *obs, void *actions,
                                size_t actions_size, plugrl_dtype dtype);

/*
** Reports the step just taken by every env: next_obs (num_envs rows; the
** terminal observation for an env that ended), rewards, terminated and
** truncated (num_envs each), and success (NULL, or num_envs flags read for
** envs that ended). Sends the feedback for every env whose chunk ended,
** and calls the episode callback for each episode that ended. Blocks as
** plugrl_feedback does when it sends: up to send_timeout_ms, plus
** reconnect_timeout_ms if the connection had ended. A feedback dropped
** with its connection (SPEC 7.6) is not an error, unless that connection
** is the fourth or later in a row to end since a feedback last went
** through (those that ended in acts count too): then
** PLUGRL_CONNECT_FAILED (the server ends each connection after an action;
** nothing the runner sends reaches it), and the count starts again. Only
** a report whose own feedback is dropped makes this check: an act that
** rides through the fourth end returns PLUGRL_OK, and a report whose
** feedback then goes through returns PLUGRL_OK and starts the count again.
*/
plugrl_status plugrl_runner_report(plugrl_runner *runner, const plugrl_observation *next_obs, const double *rewards,
                                   const uint8_t *terminated, const uint8_t *truncated, const uint8_t *success);

/* Elements per env per step of the server's actions (prod(da)); *known is
** 0 before it is known: no action yet, and no metadata action_dim of at
** least 1 whose action_horizon x num_envs x action_dim values of 8 bytes
** fit the message cap (64 MiB when max_message_size is -1, no cap: a
** server's word alone never sizes a larger buffer). So a buffer of
** num_envs x step_size doubles sized from it before the first action is
** at most the message cap. */
plugrl_status plugrl_runner_step_size(plugrl_runner *runner, int64_t *step_size, int *known);

/*
** The rest of env's action chunk, for a controller that plans ahead (a
** ROS 2 JointTrajectory of the chunk, say): the step the last
** plugrl_runner_act gave env, then each later step of its chunk, written to
** dst step after step as *steps x step_size elements of dtype. Call it
** between plugrl_runner_act and plugrl_runner_report; elsewhere it returns
** PLUGRL_OUT_OF_ORDER with *steps 0. *steps is set to the steps left
** whenever env is valid and the call is in its place, and is 0 after any
** other failure; a dst_size too small for them returns
** PLUGRL_BUFFER_TOO_SMALL (dst may be NULL with dst_size 0, to ask how
** many). A chunk has at most H
** steps, H being the server's action horizon (metadata action_horizon).
** Does not block and sends nothing. Not from another thread during a call
** on the runner (PLUGRL_BUSY).
*/
plugrl_status plugrl_runner_chunk(plugrl_runner *runner, int64_t env, void *dst, size_t dst_size, plugrl_dtype dtype,
                                  int64_t *steps);

/*
** plugrl_stats for a runner: its client's counters (the same numbers
** plugrl_stats on the client gives) plus the runner's own episodes and
** env_steps. Any thread, any time, also while another thread is inside
** plugrl_runner_act or plugrl_runner_report. Returns as plugrl_stats does;
** PLUGRL_CLOSED also when the runner's client was closed.
*/
plugrl_status plugrl_runner_stats(plugrl_runner *runner, plugrl_statistics *out);

/*
** An episode callback: called during plugrl_runner_report, on its thread,
** for each episode that ended at this step, with its env, return, length in
** steps and success flag. It must not call into the library: a call on
** the runner or its client returns PLUGRL_BUSY there (plugrl_runner_free
** and plugrl_close included, which would otherwise wait for the report
** they are inside of; plugrl_interrupt and plugrl_runner_interrupt
** excepted). It must return, and not turn cancellation on where a cancel
** may act, as a log callback must (plugrl_log_fn).
*/
typedef void (*plugrl_episode_fn)(void *user, int64_t env, double episode_return, int64_t length, int success);

/* Sets (or, with fn NULL, clears) the runner's episode callback. */
plugrl_status plugrl_runner_on_episode(plugrl_runner *runner, plugrl_episode_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif /* PLUGRL_H */
