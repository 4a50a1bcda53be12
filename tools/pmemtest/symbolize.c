/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * symbolize.c -- call sites as "function (file:line)", through addr2line
 *
 * Only the stacks that appear in a report are symbolized: one addr2line
 * process per (stack, module), results cached per frame.  addr2line -i
 * expands inlining, so a librio primitive inlined into the program shows
 * as "rio_drain (rio.h:251) <- update (counter.c:40)".  Without addr2line
 * or debug information a frame prints as module+offset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmemtest_int.h"

struct cached {
	uint32_t module;
	uint64_t offset;
	char *text;       /* inline chain, innermost first, " <- " between */
	char *outer;      /* the innermost element outside librio's rio.h
			     and the compiler's *intrin.h: the program's
			     own code around an inlined primitive or
			     vector store */
};

static struct cached *cache;
static size_t ncache;
static char **site_text;   /* [stack id] */
static char **short_text;  /* [stack id] */
static uint32_t nsite;

static struct cached *
lookup(uint32_t module, uint64_t offset)
{
	for (size_t i = 0; i < ncache; i++)
		if (cache[i].module == module && cache[i].offset == offset)
			return &cache[i];
	return NULL;
}

static const char *
base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* "func at /dir/file.c:12 (discriminator 3)" -> "func (file.c:12)" */
static char *
tidy(const char *line)
{
	char func[512], loc[1024];
	const char *at = strstr(line, " at ");

	if (at == NULL)
		return pmt_xstrdup(line);
	snprintf(func, sizeof(func), "%.*s", (int)(at - line), line);
	snprintf(loc, sizeof(loc), "%s", base_name(at + 4));
	char *sp = strchr(loc, ' ');
	if (sp)
		*sp = '\0';
	if (strncmp(loc, "??", 2) == 0)
		return pmt_xstrdup(func);
	return pmt_xasprintf("%s (%s)", func, loc);
}

static void
add(uint32_t module, uint64_t offset, char *text, char *outer)
{
	cache = pmt_xrealloc(cache, (ncache + 1) * sizeof(*cache));
	cache[ncache++] = (struct cached){ module, offset, text, outer };
}

/* Resolve every uncached frame of `st` that lives in `module`. */
static void
resolve_module(struct pmt_model *m, const struct pmt_stack *st,
	uint32_t module)
{
	char *cmd = pmt_xasprintf("addr2line -C -f -i -p -a -e '%s'",
		m->modules[module]);
	size_t want = 0;
	FILE *f;
	char line[2048];

	for (uint32_t i = 0; i < st->depth; i++) {
		const struct pmt_frame *fr = &st->frames[i];
		if (fr->module != module || lookup(module, fr->offset))
			continue;
		char *c2 = pmt_xasprintf("%s 0x%llx", cmd,
			(unsigned long long)fr->offset);
		free(cmd);
		cmd = c2;
		want++;
	}
	if (want == 0) {
		free(cmd);
		return;
	}
	{
		char *c2 = pmt_xasprintf("%s 2>/dev/null", cmd);
		free(cmd);
		cmd = c2;
	}
	f = popen(cmd, "r");
	free(cmd);
	if (f == NULL)
		return;
	uint64_t cur_off = 0;
	char *text = NULL, *outer = NULL;
	bool have = false;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "0x", 2) == 0) {
			if (have)
				add(module, cur_off, text, outer);
			cur_off = strtoull(line, NULL, 16);
			const char *rest = strstr(line, ": ");
			text = tidy(rest ? rest + 2 : "??");
			outer = pmt_xstrdup(text);
			have = true;
		} else if (have && strstr(line, "(inlined by) ") != NULL) {
			char *t = tidy(strstr(line, "(inlined by) ") + 13);
			char *nt = pmt_xasprintf("%s <- %s", text, t);
			free(text);
			text = nt;
			if (strstr(outer, "(rio.h:") != NULL ||
			    strstr(outer, "intrin.h:") != NULL) {
				free(outer);
				outer = t;
			} else {
				free(t);
			}
		}
	}
	if (have)
		add(module, cur_off, text, outer);
	pclose(f);
}

static struct cached *
frame(struct pmt_model *m, const struct pmt_stack *st, uint32_t i)
{
	const struct pmt_frame *fr = &st->frames[i];
	struct cached *c;

	if (fr->module == 0 || fr->module > m->nmodules)
		return NULL;
	c = lookup(fr->module, fr->offset);
	if (c == NULL) {
		resolve_module(m, st, fr->module);
		c = lookup(fr->module, fr->offset);
	}
	if (c == NULL || strncmp(c->text, "??", 2) == 0)
		return NULL;
	return c;
}

static char *
raw(struct pmt_model *m, const struct pmt_frame *fr)
{
	if (fr->module == 0 || fr->module > m->nmodules)
		return pmt_xasprintf("0x%llx", (unsigned long long)fr->offset);
	return pmt_xasprintf("%s+0x%llx", base_name(m->modules[fr->module]),
		(unsigned long long)fr->offset);
}

static void
grow(uint32_t stack)
{
	if (stack < nsite)
		return;
	site_text = pmt_xrealloc(site_text, (stack + 1) * sizeof(char *));
	short_text = pmt_xrealloc(short_text, (stack + 1) * sizeof(char *));
	memset(site_text + nsite, 0, (stack + 1 - nsite) * sizeof(char *));
	memset(short_text + nsite, 0, (stack + 1 - nsite) * sizeof(char *));
	nsite = stack + 1;
}

const char *
pmt_symbolize_site(struct pmt_model *m, uint32_t stack, unsigned max_frames)
{
	const struct pmt_stack *st;
	char *s = NULL;

	if (stack == 0 || stack > m->nstacks)
		return "(unknown site)";
	grow(stack);
	if (site_text[stack] != NULL)
		return site_text[stack];
	st = &m->stacks[stack];
	for (uint32_t i = 0; i < st->depth && i < max_frames; i++) {
		struct cached *c = frame(m, st, i);
		char *t = c ? pmt_xstrdup(c->text) : raw(m, &st->frames[i]);
		char *ns = s ? pmt_xasprintf("%s\n        %s", s, t) :
			pmt_xasprintf("        %s", t);
		free(s);
		free(t);
		s = ns;
	}
	site_text[stack] = s ? s : pmt_xstrdup("        (no frames)");
	return site_text[stack];
}

const char *
pmt_symbolize_short(struct pmt_model *m, uint32_t stack)
{
	const struct pmt_stack *st;
	struct cached *c;

	if (stack == 0 || stack > m->nstacks)
		return "(unknown site)";
	grow(stack);
	if (short_text[stack] != NULL)
		return short_text[stack];
	st = &m->stacks[stack];
	if (st->depth == 0)
		return "(no frames)";
	c = frame(m, st, 0);
	short_text[stack] = c ? pmt_xstrdup(c->outer) : raw(m, &st->frames[0]);
	return short_text[stack];
}

void
pmt_symbolize_free(void)
{
	for (size_t i = 0; i < ncache; i++) {
		free(cache[i].text);
		free(cache[i].outer);
	}
	free(cache);
	for (uint32_t i = 0; i < nsite; i++) {
		free(site_text[i]);
		free(short_text[i]);
	}
	free(site_text);
	free(short_text);
	cache = NULL;
	site_text = short_text = NULL;
	ncache = nsite = 0;
}
