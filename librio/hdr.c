/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hdr.c -- the one check of an on-media header's identity and version
 *
 * Every persistent format of the stack (the rio pool, the file cache
 * superblock, the safe-sync image superblock, the vista segment and log
 * headers, the Vistagrams tables superblock, the Discount Checking
 * superblock) starts with the same few fields, and one policy decides
 * whether this code may use it (docs/FORMAT.md, "Header rules"):
 *
 *   H1. magic differs                  -> not this format      (BADMAGIC)
 *   H2. checksum differs               -> damaged              (BADCSUM)
 *   H3. major differs from ours        -> another format       (VERSION)
 *   H4. minor newer than ours          -> accepted: a minor change is
 *                                         compatible by definition
 *   H5. an incompat bit we do not know -> refused              (FEATURE)
 *   H6. a ro_compat bit we do not know -> read-only use only; refused for
 *                                         writing              (FEATURE)
 *   H7. a compat bit we do not know    -> accepted
 *   H8. reserved bytes not zero        -> damaged              (RESERVED),
 *       unless an unknown compat bit (H7) may explain them
 *
 * The rules are tried in this order and the first that fails decides.  A
 * format lacking a field (no ro_compat, say) skips its rule.  Each library
 * keeps its own error code space: the rule maps each verdict to one code
 * of the caller's library, the same code for every format it owns.
 * Modelled on PMDK's pool_hdr and util_feature_check.  The check only
 * reads: nothing is written, whatever the verdict.
 */
#include <stdio.h>

#include "rio_int.h"

bool
rio__all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

static int
verdict(const struct rio__hdr_rule *r, enum rio__hdr_verdict v, char *msg,
	size_t len, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int
verdict(const struct rio__hdr_rule *r, enum rio__hdr_verdict v, char *msg,
	size_t len, const char *fmt, ...)
{
	va_list ap;

	if (msg != NULL && len > 0) {
		va_start(ap, fmt);
		vsnprintf(msg, len, fmt, ap);
		va_end(ap);
	}
	return r->code[v];
}

int
rio__hdr_check(const struct rio__hdr_rule *r, const struct rio__hdr_view *h,
	unsigned mode, char *msg, size_t len)
{
	uint32_t unknown;

	if (msg != NULL && len > 0)
		msg[0] = '\0';
	/* H1 */
	if (memcmp(h->magic, r->magic, r->magic_len) != 0)
		return verdict(r, RIO__HDR_BADMAGIC, msg, len,
			"not a %s (bad magic)", r->what);
	/* H2 */
	if (!h->csum_ok)
		return verdict(r, RIO__HDR_BADCSUM, msg, len,
			"%s header checksum mismatch", r->what);
	/* H3; H4 needs nothing: any minor of our major is accepted */
	if (h->major != r->major)
		return verdict(r, RIO__HDR_VERSION, msg, len,
			"%s format %u.%u is not this library's %u.x (%u.%u)",
			r->what, h->major, h->minor, r->major, r->major,
			r->minor);
	/* H5 */
	unknown = h->incompat & ~r->incompat_known;
	if ((r->fields & RIO__HDR_INCOMPAT) && unknown)
		return verdict(r, RIO__HDR_FEATURE, msg, len,
			"%s uses unknown incompat features 0x%x", r->what,
			unknown);
	/* H6 */
	unknown = h->ro_compat & ~r->ro_compat_known;
	if ((r->fields & RIO__HDR_RO_COMPAT) && unknown &&
	    mode != RIO__HDR_READ)
		return verdict(r, RIO__HDR_FEATURE, msg, len,
			"%s uses unknown ro_compat features 0x%x: only "
			"read-only use is possible", r->what, unknown);
	/* H7, H8 */
	if ((r->fields & RIO__HDR_COMPAT) && (h->compat & ~r->compat_known))
		return 0;
	for (size_t i = 0; i < RIO__HDR_NRESERVED; i++)
		if (h->reserved[i].p != NULL &&
		    !rio__all_zero(h->reserved[i].p, h->reserved[i].n))
			return verdict(r, RIO__HDR_RESERVED, msg, len,
				"%s header has non-zero reserved bytes",
				r->what);
	return 0;
}
