/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tty_prog.c -- a linked full-screen-like program: raw terminal, SIGWINCH
 *               handler (unit_test.cpp, [tty])
 *
 *   dc-test-tty DIR x      (standard input and output: a terminal)
 *
 * Puts its terminal in raw mode (no echo, no line editing), installs a
 * SIGWINCH handler, takes a checkpoint and kills itself.  Run again, it
 * is resumed at the checkpoint -- after something (a shell) set the
 * terminal back to cooked mode -- and prints whether the terminal is raw
 * again and whether it was asked to repaint (SIGWINCH), within a second.
 * Asked, it answers as nvi does: it asks the window size, and again at
 * each further SIGWINCH (within a second), and prints the rows of each
 * answer (a program that redraws only when the size changed repaints
 * when two answers differ).
 *
 * Invariants: prints one line "resumed raw=R winch=W rows=N,N..." only
 * when resumed; exits 0 then, 1 if dc_init fails.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "prog_util.h"

static volatile sig_atomic_t winch;

static void
on_winch(int sig)
{
	(void)sig;
	winch = 1;
}

int
main(int argc, char **argv)
{
	dc_test_start(argc, argv);
	struct termios t;
	if (tcgetattr(0, &t) != 0)
		return 2;
	cfmakeraw(&t);
	if (tcsetattr(0, TCSANOW, &t) != 0)
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	int rc = dc_checkpoint();
	if (rc < 0)
		return 1;
	if (rc == 0)
		kill(getpid(), SIGKILL);
	for (int i = 0; i < 100 && !winch; i++)
		usleep(10000);
	if (tcgetattr(0, &t) != 0)
		return 2;
	int raw = !(t.c_lflag & (ICANON | ECHO));
	int got = winch;
	char rows[64] = "";
	for (int k = 0; k < 4 && winch; k++) {
		winch = 0;
		struct winsize w;
		if (ioctl(0, TIOCGWINSZ, &w) != 0)
			return 2;
		snprintf(rows + strlen(rows), sizeof(rows) - strlen(rows),
			"%s%d", k ? "," : "", w.ws_row);
		for (int i = 0; i < 100 && !winch; i++)
			usleep(10000);
	}
	printf("resumed raw=%d winch=%d rows=%s\r\n", raw, got, rows);
	fflush(stdout);
	return 0;
}
