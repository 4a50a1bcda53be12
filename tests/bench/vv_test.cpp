// SPDX-License-Identifier: BSD-3-Clause
// vv_test.cpp -- Vista's Versions 0-2 (bench/tpcb_tpcc/vversions.c) alone:
// commit, abort and recovery keep or restore exactly the declared ranges,
// and every kind of bad input gets its code and a message and loses
// nothing (the transaction goes on; the pool stays as it was).
#include "../common/test_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "vv_layout.h"
#include "vversions.h"

using test::TempDir;

namespace {

const vv_version all[] = { VV_V0, VV_V1, VV_V2 };
constexpr size_t DB = 1u << 16;

vv *make(const TempDir &d, vv_version ver, size_t max_ranges = 0,
	size_t heap = 1u << 16)
{
	vv_opts o = {};
	o.version = ver;
	o.db_size = DB;
	o.heap_size = heap;
	o.max_ranges = max_ranges;
	o.rio_flags = RIO_FORCE_CACHELINE | RIO_NO_SIGNALS;
	vv *v = nullptr;
	REQUIRE_OK(vv_create((d / "pool").c_str(), &o, &v));
	unsigned char *db = (unsigned char *)vv_db(v);
	for (size_t i = 0; i < DB; i++)
		db[i] = (unsigned char)(i * 7);
	REQUIRE_OK(vv_loaded(v));
	return v;
}

vv *reopen(const TempDir &d, vv_version ver)
{
	vv *v = nullptr;
	REQUIRE_OK(vv_open((d / "pool").c_str(), ver,
		RIO_FORCE_CACHELINE | RIO_NO_SIGNALS, &v));
	return v;
}

bool pristine(vv *v, size_t from = 0, size_t to = DB)
{
	const unsigned char *db = (const unsigned char *)vv_db(v);
	for (size_t i = from; i < to; i++)
		if (db[i] != (unsigned char)(i * 7))
			return false;
	return true;
}

// Patch the pool file: len bytes at user-area offset off.
void patch(const TempDir &d, uint64_t off, const void *p, size_t len)
{
	int fd = open((d / "pool").c_str(), O_RDWR);
	REQUIRE(fd >= 0);
	REQUIRE(pwrite(fd, p, len, (off_t)(RIO_POOL_HDR_SIZE + off)) ==
		(ssize_t)len);
	close(fd);
}

} // namespace

TEST_CASE("commit keeps, abort and recovery restore the declared ranges",
	"[vv]")
{
	for (vv_version ver : all) {
		DYNAMIC_SECTION(vv_version_name(ver))
		{
			TempDir d;
			vv *v = make(d, ver);
			unsigned char *db = (unsigned char *)vv_db(v);
			vv_range r[2] = { { db + 100, 50 }, { db + 4000, 300 } };
			// Committed.
			REQUIRE_OK(vv_begin(v));
			REQUIRE_OK(vv_set_ranges(v, 2, r));
			memset(db + 100, 0xaa, 50);
			memset(db + 4000, 0xbb, 300);
			REQUIRE_OK(vv_commit(v));
			// Aborted: an overlapping range declared twice.
			REQUIRE_OK(vv_begin(v));
			REQUIRE_OK(vv_set_ranges(v, 1, &r[0]));
			memset(db + 100, 0x11, 20);
			REQUIRE_OK(vv_set_ranges(v, 1, &r[0]));
			memset(db + 100, 0x22, 50);
			REQUIRE_OK(vv_abort(v));
			REQUIRE(db[100] == 0xaa);
			REQUIRE(db[149] == 0xaa);
			// Left open: the close is a crash, recovery undoes it.
			REQUIRE_OK(vv_begin(v));
			REQUIRE_OK(vv_set_ranges(v, 1, &r[1]));
			memset(db + 4000, 0xcc, 300);
			REQUIRE_OK(vv_close(v));
			v = reopen(d, ver);
			db = (unsigned char *)vv_db(v);
			REQUIRE(db[100] == 0xaa);
			REQUIRE(db[4000] == 0xbb);
			REQUIRE(db[4299] == 0xbb);
			REQUIRE(pristine(v, 0, 100));
			REQUIRE(pristine(v, 150, 4000));
			REQUIRE(pristine(v, 4300));
			// The mirror (V1/V2) agrees: another abort of the range.
			REQUIRE_OK(vv_begin(v));
			vv_range r1 = { db + 4000, 300 };
			REQUIRE_OK(vv_set_ranges(v, 1, &r1));
			memset(db + 4000, 0xdd, 300);
			REQUIRE_OK(vv_abort(v));
			REQUIRE(db[4100] == 0xbb);
			REQUIRE_OK(vv_close(v));
		}
	}
}

TEST_CASE("bad calls and ranges: a code, a message, nothing lost", "[vv]")
{
	for (vv_version ver : all) {
		DYNAMIC_SECTION(vv_version_name(ver))
		{
			TempDir d;
			vv *v = make(d, ver, 4);
			unsigned char *db = (unsigned char *)vv_db(v);
			vv_range ok = { db + 10, 10 };
			REQUIRE_RC(vv_set_ranges(v, 1, &ok), -EINVAL);
			REQUIRE_RC(vv_commit(v), -EINVAL);
			REQUIRE_RC(vv_abort(v), -EINVAL);
			REQUIRE_OK(vv_begin(v));
			REQUIRE_RC(vv_begin(v), -EINVAL);
			const vv_range bad[] = {
				{ db - 1, 4 },        // before
				{ db + DB - 2, 4 },   // over the end
				{ db + DB + 64, 1 },  // after
				{ db + 8, SIZE_MAX }, // wraps
			};
			for (const vv_range &b : bad) {
				vv_range two[2] = { ok, b };
				REQUIRE_RC(vv_set_ranges(v, 2, two), RIO_ERANGE);
			}
			// The transaction goes on; ok was not declared by the
			// failed calls, so it is declared now, and the abort
			// restores it.
			REQUIRE_OK(vv_set_ranges(v, 1, &ok));
			memset(db + 10, 0xee, 10);
			REQUIRE_OK(vv_abort(v));
			REQUIRE(pristine(v));
			REQUIRE_OK(vv_close(v));
		}
	}
}

TEST_CASE("a full range array or heap: -ENOSPC, the transaction goes on",
	"[vv]")
{
	SECTION("V1 and V2: more ranges than max_ranges")
	{
		for (vv_version ver : { VV_V1, VV_V2 }) {
			TempDir d;
			vv *v = make(d, ver, 4);
			unsigned char *db = (unsigned char *)vv_db(v);
			vv_range r[5];
			for (int i = 0; i < 5; i++)
				r[i] = { db + 1000 * i, 8 };
			REQUIRE_OK(vv_begin(v));
			REQUIRE_OK(vv_set_ranges(v, 3, r));
			REQUIRE_RC(vv_set_ranges(v, 2, r + 3), -ENOSPC);
			memset(db, 0x5a, 8);
			memset(db + 2000, 0x5a, 8);
			REQUIRE_OK(vv_commit(v));
			REQUIRE_OK(vv_close(v));
			v = reopen(d, ver);
			db = (unsigned char *)vv_db(v);
			REQUIRE(db[2007] == 0x5a);
			REQUIRE(pristine(v, 8, 2000));
			REQUIRE_OK(vv_close(v));
		}
	}
	SECTION("V0: a range larger than the heap")
	{
		TempDir d;
		vv *v = make(d, VV_V0, 0, 3 * VV_HEAP_BLOCKS);
		unsigned char *db = (unsigned char *)vv_db(v);
		vv_range r[2] = { { db + 64, 100 }, { db + 8192, 8192 } };
		REQUIRE_OK(vv_begin(v));
		REQUIRE_RC(vv_set_ranges(v, 2, r), -ENOSPC);
		REQUIRE_OK(vv_set_ranges(v, 1, r));
		memset(db + 64, 0x77, 100);
		REQUIRE_OK(vv_abort(v));
		REQUIRE(pristine(v));
		// The blocks the failed call took were given back: the same
		// small transaction fits again and again.
		for (int i = 0; i < 100; i++) {
			REQUIRE_OK(vv_begin(v));
			REQUIRE_OK(vv_set_ranges(v, 1, r));
			REQUIRE_OK(vv_commit(v));
		}
		REQUIRE_OK(vv_close(v));
	}
}

TEST_CASE("a pool that is not what it should be is refused, unchanged",
	"[vv]")
{
	TempDir d;
	vv_opts o = {};
	o.version = VV_V0;
	o.db_size = 0;
	vv *v = nullptr;
	REQUIRE_RC(vv_create((d / "zero").c_str(), &o, &v), -EINVAL);
	v = make(d, VV_V1);
	REQUIRE_OK(vv_close(v));
	SECTION("another Version")
	{
		REQUIRE_RC(vv_open((d / "pool").c_str(), VV_V2,
			RIO_NO_SIGNALS, &v), RIO_ELAYOUT);
		REQUIRE_RC(vv_open((d / "pool").c_str(), VV_V0,
			RIO_NO_SIGNALS, &v), RIO_ELAYOUT);
	}
	SECTION("a header byte changed")
	{
		uint64_t big = 1ull << 40;
		patch(d, offsetof(vv_hdr, db_size), &big, 8);
		REQUIRE_RC(vv_open((d / "pool").c_str(), VV_V1,
			RIO_NO_SIGNALS, &v), RIO_EBADCSUM);
	}
	SECTION("never finished (no magic)")
	{
		char zero[8] = {};
		patch(d, 0, zero, 8);
		REQUIRE_RC(vv_open((d / "pool").c_str(), VV_V1,
			RIO_NO_SIGNALS, &v), RIO_EBADMAGIC);
	}
	SECTION("a sealed entry outside the database")
	{
		// Entry 0 of generation 1 (state: generation 0, IDLE).
		v = reopen(d, VV_V1);
		REQUIRE_OK(vv_close(v)); // recovery used up generation 1
		vv_hdr h;
		int fd = open((d / "pool").c_str(), O_RDONLY);
		REQUIRE(pread(fd, &h, sizeof(h), RIO_POOL_HDR_SIZE) ==
			(ssize_t)sizeof(h));
		uint64_t w;
		REQUIRE(pread(fd, &w, 8, RIO_POOL_HDR_SIZE + VV_STATE_OFF) == 8);
		close(fd);
		uint64_t g = (w >> 2) + 1;
		vv_entry e = { DB, 8, g, vv_entry_seal(DB, 8, g) };
		patch(d, h.log_off, &e, sizeof(e));
		REQUIRE_RC(vv_open((d / "pool").c_str(), VV_V1,
			RIO_NO_SIGNALS, &v), -EBADMSG);
	}
	SECTION("V0: an undo list that loops, refused before any write")
	{
		TempDir d0;
		v = make(d0, VV_V0);
		REQUIRE_OK(vv_close(v));
		vv_hdr h;
		int fd = open((d0 / "pool").c_str(), O_RDONLY);
		REQUIRE(pread(fd, &h, sizeof(h), RIO_POOL_HDR_SIZE) ==
			(ssize_t)sizeof(h));
		close(fd);
		// A well-sealed record whose next is itself, as the head.
		uint64_t rec = h.aux_off + VV_HEAP_BLOCKS + sizeof(vv_block);
		vv_undo u = { rec, 0, 8, rec + 64, 1, 0 };
		u.seal = vv_undo_seal(&u);
		uint64_t junk = 0x0123456789abcdefull;
		patch(d0, rec + 64, &junk, 8); // the "before-image"
		patch(d0, rec, &u, sizeof(u));
		patch(d0, VV_STATE_OFF, &rec, 8);
		REQUIRE_RC(vv_open((d0 / "pool").c_str(), VV_V0,
			RIO_NO_SIGNALS, &v), -EBADMSG);
		unsigned char first[8];
		fd = open((d0 / "pool").c_str(), O_RDONLY);
		REQUIRE(pread(fd, first, 8, RIO_POOL_HDR_SIZE + VV_DB_OFF) == 8);
		close(fd);
		for (int i = 0; i < 8; i++)
			REQUIRE(first[i] == (unsigned char)(i * 7));
	}
	SECTION("V0: an undo list head that names no record")
	{
		TempDir d0;
		v = make(d0, VV_V0);
		REQUIRE_OK(vv_close(v));
		uint64_t head = 12345;
		patch(d0, VV_STATE_OFF, &head, 8);
		REQUIRE_RC(vv_open((d0 / "pool").c_str(), VV_V0,
			RIO_NO_SIGNALS, &v), -EBADMSG);
	}
}
