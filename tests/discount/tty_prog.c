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
 *
 * Invariants: prints one line "resumed raw=R winch=W" only when resumed;
 * exits 0 then, 1 if dc_init fails.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
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
	printf("resumed raw=%d winch=%d\r\n", raw, (int)winch);
	fflush(stdout);
	return 0;
}
