/* The chat's user lines: libedit (line editing, history) when standard input is a terminal,
 * plain reads of lines otherwise (a pipe, a file: scripts and tests). Both wait on a second fd
 * too, the Ctrl-C watcher's wake-up (run.h: wake_fd), so Ctrl-C at the prompt is heard. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

typedef struct ZrLineInput ZrLineInput;

typedef enum ZrLineStatus { ZR_LINE_OK, ZR_LINE_EOF, ZR_LINE_INTERRUPT, ZR_LINE_ERROR } ZrLineStatus;

/* tty: standard input is a terminal (the app's environment says so). wake_fd: readable when
 * Ctrl-C was pressed. NULL when out of memory or libedit cannot start. */
ZrLineInput *zr_line_open(const char *prog, bool tty, int wake_fd);
/* One line without its newline (*line valid until the next call; NUL-terminated). prompt is
 * shown on a terminal only. A line also goes into the history. */
ZrLineStatus zr_line_read(ZrLineInput *in, const char *prompt, const char **line, size_t *len);
void zr_line_close(ZrLineInput *in);
