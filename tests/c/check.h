/*
** check.h - CHECK for the C tests that report each failed check, with its
** file and line, and go on: failures counts them, and the test's main
** exits 1 when it is not 0.
*/
#ifndef PLUGRL_TEST_CHECK_H
#define PLUGRL_TEST_CHECK_H

#include <stdio.h>

static int failures;

/* CHECK(cond, format, ...): when cond is false, counts a failure and
** prints the message that format and the arguments make. */
#define CHECK(cond, ...)                                                                                         \
  do {                                                                                                           \
    if (!(cond)) {                                                                                               \
      failures++;                                                                                                \
      fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);                                                      \
      fprintf(stderr, __VA_ARGS__);                                                                              \
      fputc('\n', stderr);                                                                                       \
    }                                                                                                            \
  } while (0)

#endif
