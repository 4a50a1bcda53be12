/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * callsite.c -- capture the call stack of a flush or fence, interned
 *
 * Each flush and fence record names the stack that issued it.  The raw
 * return addresses (glibc backtrace(), which unwinds through .eh_frame, so
 * it works in optimized code without frame pointers) are interned in a
 * hash table; a stack seen for the first time is resolved to (module, offset)
 * pairs with dladdr1() -- offset = address minus the module's load bias, what
 * addr2line wants for executables and shared objects alike -- and emitted as
 * a STACK record (and a MODULE record for each new module).  The driver
 * symbolizes only the stacks it reports.
 *
 * Invariants
 *   C1. Equal raw stacks get equal ids; ids start at 1 (0 = no stack).
 *   C2. Leading frames inside the tracer's own module (the hook functions,
 *       the libpmem shim) are dropped: frame 0 of a STACK record is the
 *       program's own flush or fence site (for librio's inline primitives,
 *       the instruction inlined into the caller).
 *   C3. Called with the tracer's lock held: no locking of its own.
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "trace_layout.h"
#include "tracer_int.h"

#define MAX_DEPTH 64
#define EXTRA 8 /* tracer frames to look through (C2) */

struct stack {
	uint64_t hash;
	uint32_t id;
	uint32_t n;
	void **pc;
};

struct module {
	struct link_map *lm;
	uint32_t id;
};

static unsigned depth = 8;
static pmt_emit_fn emit_fn;
static struct stack *tab;   /* open addressing */
static size_t tab_cap, tab_used;
static uint32_t next_stack = 1;
static struct module *mods;
static size_t nmods;
static struct link_map *self_lm;

void
pmt_callsite_init(unsigned d, pmt_emit_fn emit)
{
	void *pc[4];
	Dl_info info;

	depth = d == 0 ? 1 : (d > MAX_DEPTH ? MAX_DEPTH : d);
	emit_fn = emit;
	/* A new trace: every stack and module is new to it (T3). */
	for (size_t i = 0; i < tab_cap; i++)
		free(tab[i].pc);
	free(tab);
	free(mods);
	tab = NULL;
	mods = NULL;
	tab_cap = tab_used = nmods = 0;
	next_stack = 1;
	if (dladdr1((void *)pmt_callsite_init, &info, (void **)&self_lm,
		    RTLD_DL_LINKMAP) == 0)
		self_lm = NULL;
	/* The first backtrace() loads libgcc_s: do it now, not inside a
	 * traced flush. */
	backtrace(pc, 4);
}

static uint32_t
module_id(struct link_map *lm)
{
	char exe[PATH_MAX];
	const char *path = lm->l_name;
	struct pmt_rec_module m;
	struct module *nm;

	for (size_t i = 0; i < nmods; i++)
		if (mods[i].lm == lm)
			return mods[i].id;
	if (path == NULL || *path == '\0') {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = '\0';
		path = exe;
	}
	nm = realloc(mods, (nmods + 1) * sizeof(*mods));
	if (nm == NULL)
		return 0;
	mods = nm;
	mods[nmods].lm = lm;
	mods[nmods].id = (uint32_t)nmods + 1;
	m = (struct pmt_rec_module){ .id = mods[nmods].id };
	emit_fn(PMT_REC_MODULE, 0, &m, sizeof(m), path, strlen(path) + 1);
	return mods[nmods++].id;
}

static struct link_map *
lm_of(void *pc)
{
	Dl_info info;
	struct link_map *lm = NULL;

	if (dladdr1(pc, &info, (void **)&lm, RTLD_DL_LINKMAP) == 0)
		return NULL;
	return lm;
}

static void
emit_stack(uint32_t id, void **pc, int n)
{
	struct pmt_frame fr[MAX_DEPTH];
	struct pmt_rec_stack s = { .id = id };
	int i = 0;

	while (i < n - 1 && self_lm != NULL && lm_of(pc[i]) == self_lm)
		i++; /* C2 */
	/* A store's own instruction is recorded one byte on (C4), so the
	 * step back below lands on it. */
	for (; i < n && s.depth < depth; i++) {
		struct link_map *lm = lm_of(pc[i]);
		/* Return addresses point after the call: step back one byte
		 * so the line reported is the call's. */
		uintptr_t a = (uintptr_t)pc[i] - 1;
		fr[s.depth].reserved = 0;
		if (lm != NULL) {
			fr[s.depth].module = module_id(lm);
			fr[s.depth].offset = a - lm->l_addr;
		} else {
			fr[s.depth].module = 0;
			fr[s.depth].offset = a;
		}
		s.depth++;
	}
	emit_fn(PMT_REC_STACK, 0, &s, sizeof(s), fr,
		s.depth * sizeof(struct pmt_frame));
}

static uint64_t
hash_pcs(void **pc, int n)
{
	return XXH3_64bits_withSeed(pc, (size_t)n * sizeof(*pc), 0x5354);
}

static bool
grow(void)
{
	size_t cap = tab_cap ? tab_cap * 2 : 1024;
	struct stack *nt = calloc(cap, sizeof(*nt));

	if (nt == NULL)
		return false;
	for (size_t i = 0; i < tab_cap; i++) {
		if (tab[i].id == 0)
			continue;
		size_t j = tab[i].hash & (cap - 1);
		while (nt[j].id != 0)
			j = (j + 1) & (cap - 1);
		nt[j] = tab[i];
	}
	free(tab);
	tab = nt;
	tab_cap = cap;
	return true;
}

static uint32_t
intern(void **pc, int n)
{
	uint64_t h;
	size_t j;

	h = hash_pcs(pc + 1, n);
	if ((tab_used + 1) * 2 > tab_cap && !grow())
		return 0;
	for (j = h & (tab_cap - 1); tab[j].id != 0; j = (j + 1) & (tab_cap - 1))
		if (tab[j].hash == h && tab[j].n == (uint32_t)n &&
		    memcmp(tab[j].pc, pc + 1, (size_t)n * sizeof(void *)) == 0)
			return tab[j].id; /* C1 */
	tab[j].pc = malloc((size_t)n * sizeof(void *));
	if (tab[j].pc == NULL)
		return 0;
	memcpy(tab[j].pc, pc + 1, (size_t)n * sizeof(void *));
	tab[j].hash = h;
	tab[j].n = (uint32_t)n;
	tab[j].id = next_stack++;
	tab_used++;
	emit_stack(tab[j].id, pc + 1, n);
	return tab[j].id;
}

uint32_t
pmt_callsite_capture(void)
{
	void *pc[MAX_DEPTH + EXTRA];
	int n = backtrace(pc, (int)(depth + EXTRA));

	if (n <= 1)
		return 0;
	/* pc[0] is this function; the rest is the tracer, then the program. */
	return intern(pc, n - 1);
}

/*
 * C4.  Inside a signal handler, backtrace() walks the handler, the
 * kernel's signal trampoline, then the interrupted context: its first
 * frame is exactly trap_pc (not a return address).  The store's stack is
 * the storing instruction (pc + 1, undone by emit_stack's step back) and
 * the interrupted context's callers.
 */
uint32_t
pmt_callsite_capture_store(void *spc, void *trap_pc)
{
	void *raw[MAX_DEPTH + EXTRA + 8];
	void *pc[MAX_DEPTH + 2];
	int n = backtrace(raw, (int)(depth + EXTRA + 8)), k = 2, i;

	for (i = 0; i < n && raw[i] != trap_pc; i++)
		;
	pc[0] = NULL; /* intern() skips pc[0] */
	pc[1] = (char *)spc + 1;
	for (i++; i < n && k < (int)depth + 1; i++)
		pc[k++] = raw[i];
	return intern(pc, k - 1);
}
