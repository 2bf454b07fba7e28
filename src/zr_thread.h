/* A thread started with SIGINT blocked, as every thread but the command's own (src/app/run.h):
 * the signal must never land on a worker or on the driver's threads it starts. */
#pragma once
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

static inline bool zr_thread_start(pthread_t *th, void *(*fn)(void *), void *arg) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    const bool ok = pthread_create(th, NULL, fn, arg) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return ok;
}
