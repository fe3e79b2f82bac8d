/*
** glibc_compat.h: bind libplugrl to glibc symbol versions that glibc 2.17
** (aarch64) and 2.2.5-2.12 (x86-64) already had, so that a library built
** on Debian 12 (glibc 2.36) loads on glibc 2.31: Ubuntu 20.04 (ROS Noetic,
** Foxy and Galactic), Debian 11 and a Jetson on JetPack 5.
**
** glibc 2.32 to 2.34 moved libpthread's, libdl's and libresolv's functions
** into libc.so.6 under new default versions (pthread_key_create@@GLIBC_2.34,
** dlsym@@GLIBC_2.34, ...), and kept each old version beside it, so that
** programs built before then still run. A library linked against the new
** glibc asks for the new versions, which an older glibc does not have, and
** the dynamic loader refuses to load it ("version `GLIBC_2.34' not found").
** Bound to the old versions instead, the library runs on both: a newer
** glibc answers them from libc.so.6, an older one from libpthread.so.0,
** libdl.so.2 and libresolv.so.2, which build.sh therefore names as needed
** libraries (on a newer glibc they are empty stubs, kept for such
** programs).
**
** build.sh passes this file to every C file of the build with -include:
** the library's own and the Go runtime's and standard library's cgo files
** (runtime/cgo, net), whose calls are the ones listed. `build.sh`'s
** check_glibc fails the build when the library asks for a version newer
** than GLIBC_2.31, as a new Go release may add a call: add it here, with
** the oldest version `objdump -T` shows for it in libc.so.6.
**
** Not part of the API; not installed.
*/
#ifndef PLUGRL_GLIBC_COMPAT_H
#define PLUGRL_GLIBC_COMPAT_H

/* Linux's glibc only (__GLIBC__ is not defined yet: this comes before
** <features.h>, which must not be included ahead of a file's own
** _GNU_SOURCE). .symver in an assembly file (.S), which the same flags
** reach, would not assemble. */
#if defined(__linux__) && !defined(__ANDROID__)
#ifndef __ASSEMBLER__

#define PLUGRL_GLIBC_BIND(name, old) __asm__(".symver " #name "," old)

#if defined(__x86_64__)
PLUGRL_GLIBC_BIND(dlsym, "dlsym@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(res_search, "__res_search@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_attr_getstack, "pthread_attr_getstack@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_attr_getstacksize, "pthread_attr_getstacksize@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_attr_setaffinity_np, "pthread_attr_setaffinity_np@GLIBC_2.3.4");
PLUGRL_GLIBC_BIND(pthread_getaffinity_np, "pthread_getaffinity_np@GLIBC_2.3.4");
PLUGRL_GLIBC_BIND(pthread_getattr_np, "pthread_getattr_np@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_getspecific, "pthread_getspecific@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_join, "pthread_join@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_key_create, "pthread_key_create@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_once, "pthread_once@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_setaffinity_np, "pthread_setaffinity_np@GLIBC_2.3.4");
PLUGRL_GLIBC_BIND(pthread_setname_np, "pthread_setname_np@GLIBC_2.12");
PLUGRL_GLIBC_BIND(pthread_setspecific, "pthread_setspecific@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_sigmask, "pthread_sigmask@GLIBC_2.2.5");
PLUGRL_GLIBC_BIND(pthread_testcancel, "pthread_testcancel@GLIBC_2.2.5");
#elif defined(__aarch64__)
PLUGRL_GLIBC_BIND(dlsym, "dlsym@GLIBC_2.17");
PLUGRL_GLIBC_BIND(res_search, "__res_search@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_attr_getstack, "pthread_attr_getstack@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_attr_getstacksize, "pthread_attr_getstacksize@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_attr_setaffinity_np, "pthread_attr_setaffinity_np@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_getaffinity_np, "pthread_getaffinity_np@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_getattr_np, "pthread_getattr_np@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_getspecific, "pthread_getspecific@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_join, "pthread_join@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_key_create, "pthread_key_create@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_once, "pthread_once@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_setaffinity_np, "pthread_setaffinity_np@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_setname_np, "pthread_setname_np@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_setspecific, "pthread_setspecific@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_sigmask, "pthread_sigmask@GLIBC_2.17");
PLUGRL_GLIBC_BIND(pthread_testcancel, "pthread_testcancel@GLIBC_2.17");
#endif

#undef PLUGRL_GLIBC_BIND

#endif /* __ASSEMBLER__ */
#endif /* __linux__ */
#endif /* PLUGRL_GLIBC_COMPAT_H */
