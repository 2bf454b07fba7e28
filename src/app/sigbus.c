#include "sigbus.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

/* Only async-signal-safe calls: write(2) and _exit. zrun's maps are read-only, so the only bus
 * error it can meet is a page of a mapped file that no longer exists. */
static void on_sigbus(int sig) {
    (void)sig;
    static const char msg[] = "zrun: the model file changed while zrun was running (truncated or rewritten: "
                              "a page of it could not be read, SIGBUS); run again on a complete file\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

void zr_sigbus_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
