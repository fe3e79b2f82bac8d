/*
** sanitizer_canary.c - the positive control of tests/sanitizers.sh: a
** misuse of libplugrl that its instrumented build must report, so that a
** sanitizer that is not watching (its runtime not loaded, a plain
** libplugrl.so found first through LD_LIBRARY_PATH, reports not written
** where the script looks) fails the run instead of passing it.
**
**   sanitizer_canary race|asan|msan
**
** race: two threads fill the same plugrl_options (a global: the race
**   detector watches the program's data) with plugrl_options_init, 200000
**   times each, with nothing ordering them: the library's Go code writes
**   it from both at once. (A single overlap is enough; one thread's call
**   preempted inside the Go code gives one even on a single core.)
** asan: plugrl_options_init_size told the struct has twice the bytes of
**   the heap block it is in: the library's Go code writes past the block.
** msan: plugrl_open given options whose size and url are set and whose
**   other fields were never written (a heap block, not filled by
**   plugrl_options_init): the library's Go code reads them.
**
** Its exit status is not looked at: the script looks for the report.
*/
#include <plugrl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static plugrl_options shared;

static void *filler(void *arg) {
  (void)arg;
  for (int i = 0; i < 200000; i++) {
    plugrl_options_init(&shared);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "race") == 0) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
      if (pthread_create(&t[i], NULL, filler, NULL) != 0) {
        return 1;
      }
    }
    for (int i = 0; i < 2; i++) {
      pthread_join(t[i], NULL);
    }
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "asan") == 0) {
    void *half = malloc(sizeof(plugrl_options) / 2);
    if (half != NULL) {
      plugrl_options_init_size(half, sizeof(plugrl_options));
    }
    free(half);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "msan") == 0) {
    plugrl_options *unset = malloc(sizeof *unset);
    if (unset != NULL) {
      unset->size = sizeof *unset;
      unset->url = "ws://127.0.0.1:9";
      plugrl_client *client = NULL;
      if (plugrl_open(unset, &client) == PLUGRL_OK) {
        plugrl_close(client);
      }
    }
    free(unset);
    return 0;
  }
  fprintf(stderr, "usage: %s race|asan|msan\n", argv[0]);
  return 2;
}
