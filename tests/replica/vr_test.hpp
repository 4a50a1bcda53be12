// SPDX-License-Identifier: BSD-3-Clause
// vr_test.hpp -- helpers shared by the libvista_replica test programs
#pragma once

#include "../common/test_util.hpp"

#include <cstring>
#include <string>

#include "vista.h"
#include "vista_replica.h"

#define VR_REQUIRE_OK(expr) TEST_REQUIRE_OK(vr_err_name, vr_errormsg, expr)
#define VR_REQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(vr_err_name, vr_errormsg, expr, want)

namespace vrt {

// Fixed addresses, 4 GiB apart, away from the other libraries' tests.
inline char *addr(int slot)
{
	return (char *)(uintptr_t)(0x5a0000000000ull + ((uint64_t)slot << 32));
}

// One node: its own vista instance (log), data segment and state segment,
// in directory dir; slot picks the addresses (two slots per node).
struct Node {
	vista *v = nullptr;
	vista_segment *seg = nullptr;
	vr_node *n = nullptr;
	char *base = nullptr;

	void open(const std::string &dir, int slot, size_t size,
		struct vr_opts o = {})
	{
		std::string lp = dir + "/log", sp = dir + "/seg",
			    tp = dir + "/state";
		struct vista_opts vo = {};
		vo.log_path = lp.c_str();
		VR_REQUIRE_OK(vista_init(&vo, &v));
		VR_REQUIRE_OK(vista_map(v, sp.c_str(), addr(slot), size,
			VISTA_CREATE, &seg));
		o.state_path = tp.c_str();
		o.state_addr = addr(slot + 1);
		VR_REQUIRE_OK(vr_open(v, seg, &o, &n));
		base = (char *)vista_segment_base(seg);
	}
	void close()
	{
		if (n != nullptr)
			VR_REQUIRE_OK(vr_close(n));
		if (v != nullptr)
			VR_REQUIRE_OK(vista_fini(v));
		n = nullptr;
		v = nullptr;
		seg = nullptr;
	}
	~Node()
	{
		if (n != nullptr)
			vr_close(n);
		if (v != nullptr)
			vista_fini(v);
	}
	enum vr_role role() const
	{
		struct vr_status st;
		vr_status(n, &st);
		return st.role;
	}
	// One transaction storing `val` at offsets `offs` (8 bytes each).
	int put(std::initializer_list<size_t> offs, uint64_t val)
	{
		int rc = vista_begin_transaction(v, 0);
		if (rc)
			return rc;
		for (size_t off : offs) {
			rc = vista_set_range(v, base + off, 8);
			if (rc)
				break;
			memcpy(base + off, &val, 8);
		}
		if (rc == 0)
			rc = vr_commit(n);
		if (rc)
			vista_abort_transaction(v);
		return rc;
	}
};

} // namespace vrt
