/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * maps.c -- the process's mappings, classified, and its loaded objects
 *
 * Invariants:
 *  1. A region is TRACKED when its content belongs to the process and is
 *     checkpointed: every private mapping that is writable, or anonymous
 *     (PROT_NONE reservations become writable later), or a file mapping
 *     that holds a private copy of a page (COW: written while it was
 *     writable, then made read-only -- the dynamic loader relocates an
 *     object's RELRO part, then mprotects it read-only, at start-up and at
 *     every dlopen; mapped fresh from the file, it would come back
 *     unrelocated).  FIXED regions (file mappings that equal their file,
 *     [vdso], [vvar]) are not copied: recovery checks or re-creates them.
 *     SHARED mappings are FIXED when read-only; a writable shared mapping
 *     cannot be checkpointed (refused).
 *  2. libdc's own memory -- the dc__vol block, the ctl pool mapping, the
 *     undo log's window, the checkpoint writer's mapping (ckpt.c
 *     invariant 8), the first page of dc__st and the alternate
 *     signal stack -- is cut out of
 *     every region: never tracked.  (The last two are copied by every
 *     checkpoint and restored by recovery explicitly: ckpt.c.)
 *  3. Objects are identified by load address and ELF build-id
 *     (NT_GNU_BUILD_ID), read from memory with dl_iterate_phdr.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dc_int.h"

#define NOWN 6

/* libdc's own memory, sorted by address (invariant 2): the dc__vol block,
 * the ctl pool mapping, the undo log's window (seg.c), and what every
 * checkpoint copies explicitly (the first page of dc__st, the alternate
 * signal stack; ckpt.c). */
static unsigned
own_ranges(uint64_t r[NOWN][2])
{
	unsigned n = 0;
	r[n][0] = (uint64_t)(uintptr_t)&dc__vol;
	r[n][1] = (r[n][0] + sizeof(dc__vol) + DC__PAGE - 1) & ~(DC__PAGE - 1);
	n++;
	if (dc__vol.ctlb != NULL) {
		r[n][0] = (uint64_t)(uintptr_t)dc__vol.ctlb - RIO_POOL_HDR_SIZE;
		r[n][1] = (uint64_t)(uintptr_t)dc__vol.ctlb + DC_CTL_SIZE;
		n++;
	}
	if (dc__vol.mu_map != NULL) {
		r[n][0] = (uint64_t)(uintptr_t)dc__vol.mu_map;
		r[n][1] = r[n][0] + dc__vol.mu_map_len;
		n++;
	}
	if (dc__vol.bg_map != NULL) {
		r[n][0] = (uint64_t)(uintptr_t)dc__vol.bg_map;
		r[n][1] = r[n][0] + dc__vol.bg_len;
		n++;
	}
	r[n][0] = (uint64_t)(uintptr_t)&dc__st;
	r[n][1] = r[n][0] + DC__HOT;
	n++;
	dc__sud_altstack(&r[n][0], &r[n][1]);
	n++;
	for (unsigned i = 1; i < n; i++) /* insertion sort */
		for (unsigned j = i; j > 0 && r[j][0] < r[j - 1][0]; j--) {
			uint64_t t0 = r[j][0], t1 = r[j][1];
			r[j][0] = r[j - 1][0];
			r[j][1] = r[j - 1][1];
			r[j - 1][0] = t0;
			r[j - 1][1] = t1;
		}
	return n;
}

static unsigned
add_piece(struct dc__region *out, unsigned max, unsigned n,
	const struct dc__region *r, uint64_t a, uint64_t b)
{
	if (a >= b)
		return n;
	if (n >= max)
		return n + 1; /* counted, caller reports overflow */
	out[n] = *r;
	out[n].start = a;
	out[n].end = b;
	if (r->path[0] == '/' || r->ino)
		out[n].off = r->off + (a - r->start);
	return n + 1;
}

/* Parse /proc/self/maps without allocating (no stdio, no malloc). */
int
dc__maps_read(struct dc__region *out, unsigned max, unsigned *np)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return dc__err(-errno, "open /proc/self/maps: %s",
			strerror(errno));
	char *buf = dc__vol.buf;
	size_t have = 0;
	unsigned n = 0;
	uint64_t own[NOWN][2];
	unsigned nown = own_ranges(own);
	bool eof = false;

	while (!eof || have > 0) {
		if (!eof && have < sizeof(dc__vol.buf) - 1) {
			ssize_t k = read(fd, buf + have,
				sizeof(dc__vol.buf) - 1 - have);
			if (k < 0) {
				int e = errno;
				close(fd);
				return dc__err(-e, "read /proc/self/maps");
			}
			if (k == 0)
				eof = true;
			have += (size_t)k;
		}
		char *nl = memchr(buf, '\n', have);
		if (nl == NULL) {
			if (eof)
				nl = buf + have;
			else
				continue;
		}
		*nl = '\0';
		struct dc__region r;
		memset(&r, 0, sizeof(r));
		char perms[8] = "";
		unsigned long s, e, off, ino;
		unsigned maj, min;
		int pos = 0;
		if (sscanf(buf, "%lx-%lx %7s %lx %x:%x %lu %n", &s, &e, perms,
			    &off, &maj, &min, &ino, &pos) >= 7) {
			r.start = s;
			r.end = e;
			r.off = off;
			r.dev = ((uint64_t)maj << 32) | min;
			r.ino = ino;
			if (pos > 0) {
				const char *p = buf + pos;
				while (*p == ' ')
					p++;
				snprintf(r.path, sizeof(r.path), "%s", p);
			}
			r.prot = (perms[0] == 'r' ? PROT_READ : 0) |
				(perms[1] == 'w' ? PROT_WRITE : 0) |
				(perms[2] == 'x' ? PROT_EXEC : 0);
			if (perms[3] == 's')
				r.kind |= DC__R_SHARED;
			/* cut libdc's own memory out (invariant 2) */
			uint64_t a = r.start, b = r.end;
			for (unsigned i = 0; i < nown; i++) {
				if (own[i][1] <= a || own[i][0] >= b)
					continue;
				n = add_piece(out, max, n, &r, a,
					own[i][0] > a ? own[i][0] : a);
				a = own[i][1] < b ? own[i][1] : b;
			}
			n = add_piece(out, max, n, &r, a, b);
		}
		size_t used = (size_t)(nl - buf) + (nl < buf + have ? 1 : 0);
		memmove(buf, buf + used, have - used);
		have -= used;
		if (eof && have == 0)
			break;
	}
	close(fd);
	if (n > max)
		return dc__err(DC_ELIMIT, "more than %u mappings (%u)", max,
			n);
	*np = n;
	return 0;
}

/*
 * Does the private file mapping [a, b) hold a page that is not the file's
 * (a private copy a write made: anonymous, present or swapped out)?  One
 * PAGEMAP_SCAN that stops at the first such page: /proc/self/smaps'
 * "Anonymous:" without reading smaps.  A scan that fails counts as "yes":
 * copying a region that equals its file costs pages, never correctness.
 */
static bool
has_private_copy(int pm, uint64_t a, uint64_t b)
{
	struct page_region v;
	struct pm_scan_arg arg;
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.start = a;
	arg.end = b;
	arg.vec = (uint64_t)(uintptr_t)&v;
	arg.vec_len = 1;
	arg.max_pages = 1;
	/* not of the page cache (PAGE_IS_FILE clear), and there */
	arg.category_inverted = PAGE_IS_FILE;
	arg.category_mask = PAGE_IS_FILE;
	arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	return pm < 0 || ioctl(pm, PAGEMAP_SCAN, &arg) != 0;
}

static bool
overlaps(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	return a < d && c < b;
}

/*
 * The last fold's decision for a read-only private file region x it saw
 * exactly so (bounds, file, offset, protection) and that neither a
 * mapping change (dc__st.chg) nor an mprotect has touched since: its kind
 * in *kind.  Nothing else makes such a mapping's page a private copy
 * (but a debugger's or /proc/PID/mem write).  Saves the scan of every
 * library's text at every fold.  In recovery's checks dc__st is the fresh
 * process's, with no regions: everything is scanned.
 */
static bool
same_as_before(const struct dc__region *x, uint32_t *kind)
{
	const struct dc__region *o = dc__st.reg;
	unsigned lo = 0, hi = dc__st.nreg;
	while (lo < hi) {
		unsigned m = (lo + hi) / 2;
		if (o[m].start < x->start)
			lo = m + 1;
		else
			hi = m;
	}
	if (lo == dc__st.nreg || dc__st.chg_overflow ||
	    dc__vol.mprot_overflow)
		return false;
	o += lo;
	if (o->start != x->start || o->end != x->end || o->ino != x->ino ||
	    o->dev != x->dev || o->off != x->off || o->prot != x->prot ||
	    (o->kind & (DC__R_SHARED | DC__R_SPECIAL | DC__R_SEG)) ||
	    !(o->kind & (DC__R_FIXED | DC__R_COW)))
		return false;
	for (unsigned i = 0; i < dc__st.nchg; i++)
		if (overlaps(x->start, x->end, dc__st.chg[i].a,
			    dc__st.chg[i].b))
			return false;
	for (unsigned i = 0; i < dc__vol.nmprot; i++)
		if (overlaps(x->start, x->end, dc__vol.mprot[i].a,
			    dc__vol.mprot[i].b))
			return false;
	*kind = o->kind & (DC__R_TRACKED | DC__R_FIXED | DC__R_COW);
	return true;
}

/* The program mprotects [a, b) (sud.c). */
void
dc__maps_note_mprotect(uint64_t a, uint64_t b)
{
	const unsigned cap = sizeof(dc__vol.mprot) / sizeof(dc__vol.mprot[0]);
	if (dc__vol.nmprot < cap)
		dc__vol.mprot[dc__vol.nmprot++] = (struct dc__span){ a, b };
	else
		dc__vol.mprot_overflow = true;
}

/* A fold has classified the maps: the mprotects are in its table. */
void
dc__maps_folded(void)
{
	dc__vol.nmprot = 0;
	dc__vol.mprot_overflow = false;
}

void
dc__maps_classify(struct dc__region *r, unsigned n)
{
	/* the tracking's pagemap descriptor, or one of our own before it is
	 * open (recovery's checks) */
	int pm = dc__vol.pagemap_fd, own = -1;
	for (unsigned i = 0; i < n; i++) {
		struct dc__region *x = &r[i];
		x->kind &= DC__R_SHARED;
		if (dc__shadow_is_private(x)) {
			/* anonymous memory recovery mapped from the image
			 * (shadow.c invariant 3): anonymous it stays */
			x->dev = x->ino = x->off = 0;
			x->path[0] = '\0';
		}
		bool file = x->ino != 0;
		if (!strcmp(x->path, "[vdso]") || !strcmp(x->path, "[vvar]") ||
		    !strcmp(x->path, "[vvar_vclock]") ||
		    !strcmp(x->path, "[vsyscall]")) {
			x->kind |= DC__R_SPECIAL | DC__R_FIXED;
			continue;
		}
		if (dc__seg_is(x)) { /* moved into the segment (seg.c) */
			x->kind = DC__R_TRACKED | DC__R_SEG;
			continue;
		}
		if (x->kind & DC__R_SHARED) {
			x->kind |= DC__R_FIXED;
			continue;
		}
		if ((x->prot & PROT_WRITE) || !file) {
			x->kind |= DC__R_TRACKED;
			if (!file)
				x->kind |= DC__R_ANON;
			if (!strcmp(x->path, "[heap]"))
				x->kind |= DC__R_HEAP;
			if (!strcmp(x->path, "[stack]"))
				x->kind |= DC__R_STACK;
		} else {
			uint32_t k;
			if (same_as_before(x, &k)) {
				x->kind |= k;
				continue;
			}
			if (pm < 0 && own < 0)
				pm = own = open("/proc/self/pagemap",
					O_RDONLY | O_CLOEXEC);
#ifdef DC_BROKEN_COW_FROM_FILE
			/* broken build for the tests: every read-only file
			 * mapping is mapped from its file again at recovery,
			 * relocated RELRO parts included */
			(void)has_private_copy;
			x->kind |= DC__R_FIXED;
#else
			x->kind |= has_private_copy(pm, x->start, x->end) ?
				DC__R_TRACKED | DC__R_COW : DC__R_FIXED;
#endif
		}
	}
	if (own >= 0)
		close(own);
}

struct objs_ctx {
	struct dc__obj *out;
	unsigned max, n;
};

static int
obj_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objs_ctx *c = arg;
	(void)size;
	if (c->n >= c->max)
		return 1;
	struct dc__obj *o = &c->out[c->n++];
	memset(o, 0, sizeof(*o));
	o->base = info->dlpi_addr;
	snprintf(o->name, sizeof(o->name), "%s",
		info->dlpi_name ? info->dlpi_name : "");
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		/* notes are padded to the segment's alignment: 4, or 8 for
		 * .note.gnu.property */
		uintptr_t al = ph->p_align == 8 ? 8 : 4;
		uintptr_t p = info->dlpi_addr + ph->p_vaddr;
		uintptr_t end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end && p % al == 0) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			uintptr_t name = p + sizeof(*nh);
			uintptr_t desc = (name + nh->n_namesz + al - 1) & ~(al - 1);
			if (desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID &&
			    nh->n_namesz == 4 &&
			    !memcmp((const void *)name, "GNU", 4)) {
				o->id_len = nh->n_descsz > 20 ? 20 :
								nh->n_descsz;
				memcpy(o->build_id, (const void *)desc,
					o->id_len);
			}
			p = (desc + nh->n_descsz + al - 1) & ~(al - 1);
		}
	}
	return 0;
}

int
dc__objs_read(struct dc__obj *out, unsigned max, unsigned *n)
{
	struct objs_ctx c = { out, max, 0 };
	dl_iterate_phdr(obj_cb, &c);
	*n = c.n;
	if (c.n >= max)
		return dc__err(DC_ELIMIT, "more than %u loaded objects", max);
	return 0;
}

/* Where the kernel put the argument strings (/proc/self/stat field 48,
 * arg_start), or 0. */
uint64_t
dc__arg_start(void)
{
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char *buf = dc__vol.buf;
	ssize_t n = read(fd, buf, sizeof(dc__vol.buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the name may hold spaces */
	if (p == NULL)
		return 0;
	/* fields from 3 on follow the name; arg_start is field 48 */
	for (int field = 2; field < 48 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}
