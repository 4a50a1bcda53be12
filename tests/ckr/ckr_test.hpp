// SPDX-License-Identifier: BSD-3-Clause
// ckr_test.hpp -- what the libckr tests share: the call checks, an action
// model (the application), its reference replay, the slot reader.
#pragma once

#include "../common/test_util.hpp"

#include "ckr.h"
#include "ckr_layout.h"

#define CKR_REQUIRE_OK(expr) TEST_REQUIRE_OK(ckr_err_name, ckr_errormsg, expr)
#define CKR_REQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(ckr_err_name, ckr_errormsg, expr, want)

namespace ckrt {

const enum ckr_algo algos[] = { CKR_NAIVE, CKR_BACOU, CKR_BAZZ, CKR_IPP,
	CKR_FORK };

// An action: add `delta` to 4 words picked from `key`; not idempotent, so
// an action applied twice (or missed) shows in the state.
struct Action {
	uint64_t key;
	uint32_t delta;
	uint32_t pad;
};

inline uint64_t word_of(const Action &a, int k, uint64_t nwords)
{
	test::Rng r(a.key * 4 + (uint64_t)k);
	return r.below(nwords);
}

template <class Get, class Set>
inline void apply(const Action &a, uint64_t nwords, Get get, Set set)
{
	for (int k = 0; k < 4; k++) {
		uint64_t i = word_of(a, k, nwords);
		set(i, get(i) + a.delta);
	}
}

inline void apply_ckr(ckr *c, const Action &a)
{
	apply(a, ckr_nwords(c), [&](uint64_t i) { return ckr_read(c, i); },
		[&](uint64_t i, uint32_t v) { ckr_write(c, i, v); });
}

inline void apply_ref(std::vector<uint32_t> &s, const Action &a)
{
	apply(a, s.size(), [&](uint64_t i) { return s[i]; },
		[&](uint64_t i, uint32_t v) { s[i] = v; });
}

// Replay callback for ckr_open.
inline int replay_cb(void *, ckr *c, uint64_t, const void *rec, size_t len)
{
	if (len != sizeof(Action))
		return -1;
	Action a;
	memcpy(&a, rec, sizeof(a));
	apply_ckr(c, a);
	return 0;
}

// The state replaying the durable log from the start gives.
inline std::vector<uint32_t> reference(const std::string &dir,
	enum ckr_storage st, uint64_t nwords, uint64_t *count)
{
	std::vector<uint32_t> s(nwords, 0);
	CKR_REQUIRE_OK(ckr_log_scan(dir.c_str(), st,
		[](void *ctx, uint64_t, const void *rec, size_t len) {
			if (len != sizeof(Action))
				return -1;
			Action a;
			memcpy(&a, rec, sizeof(a));
			apply_ref(*(std::vector<uint32_t> *)ctx, a);
			return 0;
		},
		&s, count));
	return s;
}

inline std::vector<uint32_t> state_of(ckr *c)
{
	std::vector<uint32_t> s(ckr_nwords(c));
	for (uint64_t i = 0; i < s.size(); i++)
		s[i] = ckr_read(c, i);
	return s;
}

inline struct ckr_opts opts(enum ckr_algo a, enum ckr_storage st,
	uint64_t nobjs, uint32_t obj_size)
{
	struct ckr_opts o;
	memset(&o, 0, sizeof(o));
	o.algo = a;
	o.storage = st;
	o.nobjs = nobjs;
	o.obj_size = obj_size;
	o.log_capacity = 4ull << 20;
	o.rio_flags = RIO_FORCE_CACHELINE;
	o.replay = replay_cb;
	return o;
}

inline std::string ckpt_path(const std::string &dir, enum ckr_storage st)
{
	return dir + (st == CKR_STORAGE_FILE ? "/ckpt" : "/ckpt.pool");
}

// Offset of slot s's header in the checkpoint file (pool: + pool header).
inline off_t slot_off(enum ckr_storage st, uint64_t nwords, int s)
{
	return (off_t)((st == CKR_STORAGE_POOL ? RIO_POOL_HDR_SIZE : 0) +
		(uint64_t)s * ckr__slot_size(nwords));
}

// The data of slot s as it is on storage.
inline std::vector<uint32_t> slot_data(const std::string &dir,
	enum ckr_storage st, uint64_t nwords, int s)
{
	std::vector<uint32_t> v(nwords);
	int fd = open(ckpt_path(dir, st).c_str(), O_RDONLY);
	REQUIRE(fd >= 0);
	REQUIRE(pread(fd, v.data(), nwords * 4,
			slot_off(st, nwords, s) + CKR_HDR_SIZE) ==
		(ssize_t)(nwords * 4));
	close(fd);
	return v;
}

} // namespace ckrt
