/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hist_prog.c -- a linked program whose mappings change protection, size
 *                and content between checkpoints, then is killed
 *                (unit_test.cpp, [hist])
 *
 *   dc-test-hist DIR STAGE
 *
 * Six regions, each with a history across five checkpoints c1..c5, the
 * changes between two checkpoints ("m1".."m5") made with stores after
 * them:
 *   P  PROT_NONE at c1 (tracked, never write-protected), made writable
 *      and written (m1), PROT_NONE again (m3), writable again (m4);
 *   Q  read-only at c1, made writable and written (m1), read-only (m2),
 *      writable and written (m3);
 *   H  memory above the program break: grown, shrunk and grown again
 *      (m1), shrunk below its start and grown a little (m4);
 *   R  grown by mremap (it may move; m1), shrunk by mremap (m2);
 *   M  MADV_DONTNEED and MADV_FREE (m1), written whole (m2);
 *   F  a private read-only mapping of the program's own file: made
 *      writable, written and read-only again between two checkpoints
 *      (m1): it no longer equals its file, and the next checkpoint must
 *      see it (as it sees a library's relocated RELRO part);
 *   G  a guard page made with mprotect(PROT_NONE) (m1) and opened again
 *      (m3); MADV_GUARD_INSTALL must fail (m2: libdc answers as a kernel
 *      without guard pages), and the page stays ordinary memory.
 * The checkpoint directory's ctl mapping must carry protection key 0.
 * STAGE s (1..5) kills the process after m_s, before c_{s+1}; run again,
 * it resumes at c_s and prints "resumed s ok" when every region holds
 * what it held at c_s.  With DC_TRACKING=wp or undo every store after an
 * mprotect, mremap, madvise or brk must fault into libdc or be writable
 * already: a fault libdc does not resolve kills the first run (SIGSEGV).
 * Exit 3: a check failed (the line says which), 4: not killed.
 *
 * Invariants: the state the checks need is in tracked memory (globals);
 * the program break is moved only by this program between c1 and the
 * kill (standard output is unbuffered: stdio allocates nothing).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_util.h"

#define PG 4096ul
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

static char *P, *Q, *H, *R, *M, *G, *F;
static size_t rlen;
static int stage;

/* hint: an address far from other mappings (NULL: anywhere), so the
 * region's VMA never merges with a neighbour's: a fold sees exactly the
 * region it saw before, whatever its protection became */
static char *
map_at(void *hint, size_t pages, int prot, char v)
{
	char *p = mmap(hint, pages * PG, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(p != MAP_FAILED, "mmap");
	memset(p, v, pages * PG);
	need(mprotect(p, pages * PG, prot) == 0, "mprotect");
	return p;
}

static char *
map(size_t pages, int prot, char v)
{
	return map_at(NULL, pages, prot, v);
}

static void
prot(char *p, size_t pages, int pr)
{
	need(mprotect(p, pages * PG, pr) == 0, "mprotect");
}

/*
 * The ctl mapping of DIR must carry protection key 0 (where the kernel
 * shows keys: /proc/self/smaps "ProtectionKey:"): libdc commits in its
 * signal handlers, which start with the default PKRU, denying every
 * other key.
 */
static void
check_ctl_key(const char *dir)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[1024], want[600];
	bool in_ctl = false;
	snprintf(want, sizeof(want), "%s/ctl", dir);
	need(f != NULL, "open smaps");
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		int key;
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, ' '))
			in_ctl = strlen(line) >= strlen(want) &&
				!strcmp(line + strlen(line) - strlen(want), want);
		else if (in_ctl && sscanf(line, "ProtectionKey: %d", &key) == 1)
			need(key == 0, "the ctl mapping has protection key 0");
	}
	fclose(f);
}

/* What each region holds at checkpoint k. */
static void
check(int k)
{
	switch (k) {
	case 1:
		need(!memcmp(F, "\177ELF", 4), "F at c1: the file's bytes");
		need(all(Q, 4 * PG, 'q'), "Q at c1");
		need(all(H, 16 * PG, 'h'), "H at c1");
		need(rlen == 8 * PG && all(R, rlen, 'r'), "R at c1");
		need(all(M, 16 * PG, 'm'), "M at c1");
		need(all(G, 8 * PG, 'g'), "G at c1");
		break;
	case 2:
	case 3:
	case 4:
	case 5:
		need(all(F, PG, 'f'), "F");
		break;
	}
	switch (k) {
	case 2:
		need(all(P, 4 * PG, 'p'), "P at c2");
		need(all(Q, 4 * PG, 'Q'), "Q at c2");
		need(all(H, 16 * PG, 'H'), "H at c2");
		need(rlen == 64 * PG && all(R, 8 * PG, 'r') &&
			all(R + 8 * PG, 56 * PG, 'R'), "R at c2");
		need(all(M, 4 * PG, 0) && all(M + 8 * PG, 8 * PG, 'm'),
			"M at c2");
		need(all(G, 3 * PG, 'g') && all(G + 4 * PG, 4 * PG, 'g'),
			"G at c2");
		break;
	case 3:
		need(all(P, 4 * PG, 'p'), "P at c3");
		need(all(Q, 4 * PG, 'Q'), "Q at c3");
		need(all(H, 16 * PG, 'H'), "H at c3");
		need(rlen == 4 * PG && all(R, rlen, 'S'), "R at c3");
		need(all(M, 16 * PG, 'M'), "M at c3");
		need(all(G, 3 * PG, 'G') && all(G + 4 * PG, 2 * PG, 'G') &&
			all(G + 7 * PG, PG, 'G'), "G at c3");
		break;
	case 4:
		need(all(Q, 4 * PG, 'k'), "Q at c4");
		need(all(H, 16 * PG, 'H'), "H at c4");
		need(rlen == 4 * PG && all(R, rlen, 'S'), "R at c4");
		need(all(M, 16 * PG, 'M'), "M at c4");
		need(all(G, 3 * PG, 'G') && all(G + 3 * PG, PG, 'x') &&
			all(G + 4 * PG, 2 * PG, 'G') &&
			all(G + 6 * PG, PG, 'y') && all(G + 7 * PG, PG, 'G'),
			"G at c4");
		break;
	case 5:
		need(all(P, 4 * PG, 'P'), "P at c5");
		need(all(Q, 4 * PG, 'z'), "Q at c5");
		need(all(H, 4 * PG, 'e'), "H at c5");
		need(all(R, rlen, 'z') && all(M, 16 * PG, 'z') &&
			all(G, 8 * PG, 'z'), "R, M, G at c5");
		break;
	}
}

static void
ckpt(int k)
{
	ckpt_checked(k, check);
}

/* the changes after checkpoint k; then, at the chosen stage, the kill */
static void
after(int k)
{
	if (k == stage)
		kill(getpid(), SIGKILL);
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	dc_test_start(argc, argv);
	stage = atoi(argv[2]);
	check_ctl_key(argv[1]);
	int fd = open("/proc/self/exe", O_RDONLY);
	need(fd >= 0, "open the program's file");
	F = mmap((void *)0x300000200000ul, PG, PROT_READ, MAP_PRIVATE, fd, 0);
	need(F != MAP_FAILED, "mmap F");
	close(fd);
	P = map_at((void *)0x300000000000ul, 4, PROT_NONE, 0);
	Q = map_at((void *)0x300000100000ul, 4, PROT_READ, 'q');
	H = sbrk(16 * PG);
	need(H != (void *)-1, "sbrk");
	memset(H, 'h', 16 * PG);
	rlen = 8 * PG;
	R = map(8, PROT_READ | PROT_WRITE, 'r');
	M = map(16, PROT_READ | PROT_WRITE, 'm');
	G = map(8, PROT_READ | PROT_WRITE, 'g');
	ckpt(1);

	prot(P, 4, PROT_READ | PROT_WRITE);
	memset(P, 'p', 4 * PG);
	prot(Q, 4, PROT_READ | PROT_WRITE);
	memset(Q, 'Q', 4 * PG);
	prot(F, 1, PROT_READ | PROT_WRITE);
	memset(F, 'f', PG);
	prot(F, 1, PROT_READ);
	need(sbrk(-(intptr_t)(12 * PG)) != (void *)-1 &&
		sbrk((intptr_t)(12 * PG)) != (void *)-1, "brk shrink, grow");
	memset(H, 'H', 16 * PG);
	char *nr = mremap(R, rlen, 64 * PG, MREMAP_MAYMOVE);
	need(nr != MAP_FAILED, "mremap grow");
	R = nr;
	rlen = 64 * PG;
	memset(R + 8 * PG, 'R', 56 * PG);
	need(madvise(M, 4 * PG, MADV_DONTNEED) == 0 &&
		madvise(M + 4 * PG, 4 * PG, MADV_FREE) == 0, "madvise");
	prot(G + 3 * PG, 1, PROT_NONE);
	after(1);
	ckpt(2);

	memset(G, 'G', 3 * PG);
	memset(G + 4 * PG, 'G', 4 * PG);
	memset(M, 'M', 16 * PG);
	nr = mremap(R, rlen, 4 * PG, 0);
	need(nr == R, "mremap shrink");
	rlen = 4 * PG;
	memset(R, 'S', rlen);
	prot(Q, 4, PROT_READ);
	need(madvise(G + 6 * PG, PG, MADV_GUARD_INSTALL) != 0,
		"MADV_GUARD_INSTALL refused");
	after(2);
	ckpt(3);

	prot(G + 3 * PG, 1, PROT_READ | PROT_WRITE);
	memset(G + 3 * PG, 'x', PG);
	need(all(G + 6 * PG, PG, 'G'), "no guard page");
	memset(G + 6 * PG, 'y', PG);
	prot(Q, 4, PROT_READ | PROT_WRITE);
	memset(Q, 'k', 4 * PG);
	prot(P, 4, PROT_NONE);
	after(3);
	ckpt(4);

	prot(P, 4, PROT_READ | PROT_WRITE);
	memset(P, 'P', 4 * PG);
	need(sbrk(-(intptr_t)(16 * PG)) != (void *)-1 &&
		sbrk((intptr_t)(4 * PG)) != (void *)-1, "brk shrink 2");
	memset(H, 'e', 4 * PG);
	memset(R, 'z', rlen);
	memset(M, 'z', 16 * PG);
	memset(G, 'z', 8 * PG);
	memset(Q, 'z', 4 * PG);
	after(4);
	ckpt(5);

	memset(P, '!', 4 * PG);
	memset(Q, '!', 4 * PG);
	memset(H, '!', 4 * PG);
	memset(R, '!', rlen);
	need(madvise(M, 16 * PG, MADV_DONTNEED) == 0, "madvise 2");
	prot(G, 8, PROT_NONE);
	after(5);
	return 4;
}
